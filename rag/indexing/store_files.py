"""Moved to `rag.stores.files` (the stores' own files need it, and `rag.stores` is below indexing)."""

from rag.stores.files import (  # noqa: F401
    DISK_FULL_ERRNOS,
    open_nofollow,
    refuse_symlinks,
    store_child,
    store_condition,
    store_write_error,
    write_atomic,
)

__all__ = ["DISK_FULL_ERRNOS", "open_nofollow", "refuse_symlinks", "store_child", "store_condition", "store_write_error", "write_atomic"]
