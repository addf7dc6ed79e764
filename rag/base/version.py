"""The library version (one place; `rag.__version__` and the server report it)."""

__version__ = "0.1.0"
