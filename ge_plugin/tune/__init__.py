"""``ge-plugin tune``: the serving configuration that meets a latency budget, found by measuring candidates
through a real tritonserver with perf_analyzer (docs/tune.md). ``run.run_tune`` is the whole command;
``search`` the coordinate descent, ``space`` the knobs, ``specedit`` the spec writing, ``measure`` the server,
``profile`` / ``devprofile`` the device time per gear."""
