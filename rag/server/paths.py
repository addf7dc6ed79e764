"""Source paths as clients see them: relative to the resource's root, never the server's layout.

Documents indexed from files carry their path in `metadata["source"]`, often absolute
(`/srv/acme/reports/2024.pdf`). The server shows it relative to the folder the resource was
indexed from (`reports/2024.pdf` for a resource whose `index.paths` is `/srv/acme`), or relative
to the server's working directory; a path under neither is shown by its file name alone. URLs and
other non-path sources are left as they are.

Example:
    >>> paths = SourcePaths({"docs": ["/srv/acme"]}, cwd="/home/me")
    >>> paths.display("/srv/acme/reports/2024.pdf", "docs")
    'reports/2024.pdf'
    >>> paths.display("/etc/passwd", "docs"), paths.display("notes/a.md", "docs")
    ('passwd', 'notes/a.md')
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from rag.base.acl import ACL_PREFIX

__all__ = ["SourcePaths"]

# an absolute path of two components or more inside a message (POSIX, or a Windows drive)
_ABSOLUTE = re.compile(r"(?<![\w.:/\\~-])(?:/|[A-Za-z]:\\)(?:[^\s'\"<>|:*?/\\]+[/\\])+[^\s'\",;)<>]*")


class SourcePaths:
    """Rewrites source paths in response entries (`{"source", "resource", "metadata"?, ...}`).

    Args:
        roots: `{resource name: the folders (or files) it was indexed from}`.
        cwd: the fallback root for every resource (the server's working directory by default).
    """

    def __init__(self, roots: Mapping[str, Sequence[str | Path]] | None = None, *, cwd: str | Path | None = None):
        base = Path(cwd) if cwd is not None else Path.cwd()
        self._roots = {name: [r for p in paths for r in _as_roots(p)] for name, paths in (roots or {}).items()}
        self._fallback = _as_roots(base)

    def display(self, source: Any, resource: Any = None) -> Any:
        """The client-facing form of one `source` value."""
        if not isinstance(source, str) or "://" in source:
            return source
        posix, windows = PurePosixPath(source), PureWindowsPath(source)
        if not (posix.is_absolute() or windows.is_absolute()):
            return source if ".." not in posix.parts and ".." not in windows.parts else windows.name
        for root in [*self._roots.get(str(resource), []), *self._fallback]:
            try:
                relative = Path(source).relative_to(root)
            except ValueError:
                continue
            return relative.as_posix() if relative.parts else Path(source).name
        return windows.name if windows.is_absolute() and not posix.is_absolute() else posix.name

    def scrub(self, text: str) -> str:
        """`text` with every absolute path in it shown as `display` shows a source (an error message).

        Example:
            >>> SourcePaths({}, cwd="/home/me").scrub("cannot read '/srv/acme/.rag/kb/x/records.sqlite' (locked)")
            "cannot read 'records.sqlite' (locked)"
        """
        return _ABSOLUTE.sub(lambda match: str(self.display(match.group(0))), text)

    def rewrite(self, entries: Iterable[dict[str, Any]]) -> None:
        """Rewrite `source` (and `metadata["source"]`) of each entry in place, and drop the metadata's permission
        keys (`acl_*`): who else may read a document is not shown to its readers."""
        for entry in entries:
            resource = entry.get("resource")
            if "source" in entry:
                entry["source"] = self.display(entry["source"], resource)
            metadata = entry.get("metadata")
            if isinstance(metadata, dict):
                for key in [k for k in metadata if isinstance(k, str) and k.startswith(ACL_PREFIX)]:
                    del metadata[key]
            if isinstance(metadata, dict) and "source" in metadata:
                metadata["source"] = self.display(metadata["source"], resource or metadata.get("resource"))


def _as_roots(path: str | Path) -> list[Path]:
    # A file given as an index path is its own root: its parent folder is the one to strip. The
    # filesystem root is never a root (it would show every absolute path in full).
    absolute = Path(os.path.abspath(Path(path).expanduser()))
    roots = []
    for candidate in dict.fromkeys([absolute, Path(os.path.realpath(absolute))]):
        folder = candidate.parent if candidate.is_file() else candidate
        if folder != Path(folder.anchor) and folder not in roots:
            roots.append(folder)
    return roots
