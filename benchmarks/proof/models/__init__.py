"""The ``model.py`` files of the bench's Python-backend models, copied into ``<repo>/<model>/1/model.py``.

They are package data, not modules anyone imports: each runs inside a Triton Python-backend stub, where
``triton_python_backend_utils`` exists.
"""
