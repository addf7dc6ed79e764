"""The error tree (seed import path); defined in `rag.base.errors`."""

from rag.base.errors import *  # noqa: F403
from rag.base.errors import __all__  # noqa: F401
