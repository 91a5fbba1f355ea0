"""The Triton adapter: the only code in ge-plugin's serving path that touches ``triton_python_backend_utils``.

The bench's Python-backend models (``benchmarks/proof/models/``) use it too, on purpose: they are the
baselines the ``ge`` backend is measured against.
"""
