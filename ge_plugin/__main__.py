"""``python -m ge_plugin`` is the ``ge-plugin`` command."""

from ge_plugin.cli import main

raise SystemExit(main())
