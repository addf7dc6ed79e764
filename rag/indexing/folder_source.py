"""`FolderSource`: a local folder as a `rag.sources.Source` (the knowledge base syncs it as it always synced folders).

Its items are the supported files under the folder (`iter_files`: include / exclude globs, hidden files
left out, symlinks leaving the folder refused unless followed), each with its resolved path as id and
its size and modification time as version; `fetch` hands the file itself to the loader. A knowledge
base syncing one (`KnowledgeBase.sync(FolderSource("docs/"))`) runs the folder path it has always run
(`add_documents(folder, cleanup="incremental")`: records by path, size, time and content hash; moved
files re-pointed, not re-embedded), so a folder indexed either way is the same knowledge base.

Example:
    >>> import tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "a.md").write_text("# A")
    >>> [pathlib.Path(item.id).name for item in FolderSource(folder).items()]
    ['a.md']
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from rag.base.errors import ConfigError
from rag.indexing.loaders import iter_files, path_text
from rag.sources.base import Fetched, Source, SourceItem, check_patterns

__all__ = ["FolderSource"]


class FolderSource(Source):
    """A local folder (see the module docstring).

    Args:
        path: the folder (or one file).
        include, exclude: globs of files under it (see `rag.indexing.loaders.iter_files`).
        follow_symlinks: also take what symlinks leaving the folder point to.
    """

    def __init__(self, path: str | Path, *, include: str | Sequence[str] = "**/*", exclude: str | Sequence[str] = (),
                 follow_symlinks: bool = False) -> None:
        if not isinstance(path, str | Path) or not str(path):
            raise ConfigError(f"FolderSource needs a folder path, got {str(path)[:80]!r}")
        self.path = Path(path)
        self.include, self.exclude = check_patterns(include, "include"), check_patterns(exclude, "exclude")
        self.follow_symlinks = bool(follow_symlinks)
        root = path_text(self.path.resolve())
        self.prefix = root if self.path.is_file() else root.rstrip(os.sep) + os.sep

    def items(self) -> Iterator[SourceItem]:
        """The supported files under the folder, by resolved path, versioned by size and modification time."""
        for file, supported in iter_files(self.path, include=self.include, exclude=self.exclude,
                                          follow_symlinks=self.follow_symlinks):
            if not supported:
                continue
            try:
                stat = file.stat()
            except OSError as exc:
                yield SourceItem(path_text(file.resolve()), error=f"cannot read ({exc.strerror or exc})")
                continue
            yield SourceItem(path_text(file.resolve()), version=f"{stat.st_size}:{stat.st_mtime_ns}", name=file.name,
                             metadata={"path": str(file)})

    def fetch(self, item: SourceItem) -> Fetched:
        """The file itself (nothing copied)."""
        return Fetched(path=Path(item.metadata["path"]))
