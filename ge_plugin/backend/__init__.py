"""The Triton adapter: the only code in ge-plugin that touches ``triton_python_backend_utils``."""
