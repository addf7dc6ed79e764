"""Loaders for txt, md, rst, html, pdf and image files (and any registered type), and a directory walk
that reports what it skipped.

`load_file` reads a file with the loader of its suffix (`rag.indexing.formats`: the built-in
ones, then `register_loader` and installed `rag.loaders` entry points add and replace formats).

PDFs are read with pypdfium2, one `Document` per page with a zero-based `page`. Every
document carries `source` (the path), `title` (markdown `#` heading, html `<title>`/`<h1>`,
otherwise the file name) and `file_type`. Text is made safe to store and embed: NUL bytes
are dropped and lone surrogates replaced (`clean_text`).

A file that cannot be read never stops the walk: it is listed in `LoadReport.skipped` with the
reason (encrypted or corrupt PDF, binary, empty, too large, ...).

Example:
    >>> report = load_directory("docs", include="**/*.md", exclude=["drafts/*"])   # doctest: +SKIP
    >>> len(report.documents), report.skipped                                      # doctest: +SKIP
    (7, [])
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from langchain_core.documents import Document

from rag.base.errors import LoaderError
from rag.indexing.formats import (
    BUILTIN_SUFFIXES,
    is_builtin,
    loader_for,
    register_chunker,
    register_loader,
    supported_suffixes,
    unregister_chunker,
    unregister_loader,
)
from rag.indexing.file_read import check_file, read_file
from rag.indexing.limits import DEFAULT_MAX_BYTES, LoadLimits
from rag.indexing.text_safety import clean_text, path_text

__all__ = [
    "DEFAULT_MAX_BYTES",
    "SUPPORTED_SUFFIXES",
    "LoadLimits",
    "LoadReport",
    "Note",
    "Skipped",
    "clean_text",
    "iter_files",
    "load_directory",
    "load_file",
    "path_text",
    "reader_tag",
    "register_chunker",
    "register_loader",
    "supported_suffixes",
    "unregister_chunker",
    "unregister_loader",
    "unsupported_reason",
]

#: The suffixes the library reads by itself; `supported_suffixes()` adds the registered and installed ones.
SUPPORTED_SUFFIXES = BUILTIN_SUFFIXES
_COMPRESSED = frozenset([".gz", ".bz2", ".xz", ".zst", ".zip", ".tgz", ".7z", ".rar", ".tar"])
#: The version of the library's reader of a kind of file, raised when the same bytes come to give other text:
#: a knowledge base then re-reads, once, the files of that kind (`reader_tag` in each record's content hash).
#: Version 1 adds nothing, so records written before versions were kept match it. PDF 2: tables found by
#: pypdfium2 and written as rows, pages without text read by OCR; HTML 2: the main content only (issue 24);
#: HTML 3: a table row of one cell is a paragraph of its own (issue 25); HTML 4: hidden elements dropped, the main
#: content kept only where it holds the page's text (issue 37).
READER_VERSIONS = {".pdf": 2, ".html": 4, ".htm": 4}


def reader_tag(suffix: str) -> str:
    """What a record's content hash carries for the library's reader of `suffix`: "" for a version-1 reader.

    Example:
        >>> reader_tag(".PDF"), reader_tag(".md")
        ('+reader=2', '')
    """
    version = READER_VERSIONS.get(suffix.lower(), 1)
    return "" if version == 1 else f"+reader={version}"


@dataclass(frozen=True)
class Skipped:
    """A file that was not loaded, and why: `reason` is the whole message, starting with the path."""

    path: str
    reason: str


@dataclass(frozen=True)
class Note:
    """Part of a loaded file that was read more cheaply or left out, and why (a limit, no OCR engine)."""

    path: str
    note: str


@dataclass
class LoadReport:
    """What a directory walk loaded and what it skipped.

    Attributes:
        documents: one per text file, one per PDF page with text.
        skipped: unreadable files with the reason.
        files: supported files seen (loaded or skipped).
        unsupported: files under the directory whose type is not supported (not read).
        notes: parts of loaded files read more cheaply or left out (see `LoadLimits`).
    """

    documents: list[Document] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    files: int = 0
    unsupported: list[str] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)

    def extend(self, other: LoadReport) -> None:
        """Append another report's results to this one."""
        self.documents += other.documents
        self.skipped += other.skipped
        self.files += other.files
        self.unsupported += other.unsupported
        self.notes += other.notes


def load_file(path: str | Path, *, max_bytes: int | None = None, tables: bool | str = True,
              limits: LoadLimits | None = None, notes: list[str] | None = None,
              data: bytes | None = None) -> list[Document]:
    """Load one file into Documents (one per PDF page with text, one for other formats).

    Args:
        path: a .txt, .md, .markdown, .rst, .html, .htm, .pdf or image (.png, .jpg, .jpeg, .tif,
            .tiff) file, or one of a type a registered or installed loader reads
            (`rag.indexing.formats`); rst titles become `#` headings, images and PDF pages without
            text are read by OCR (`rag.indexing.pdf`).
        max_bytes: larger files are refused without being read (default `limits.max_bytes`, 256 MiB).
        tables: read the tables of PDF pages that look tabular as documents of their own
            (`chunk_type="table"`, see `rag.indexing.tables`): True or "pdfium" with pypdfium2's
            character boxes, "pdfplumber" with pdfplumber; False keeps pages as text.
        limits: the per-file cost limits and OCR settings (default `LoadLimits(tables=tables)`).
        notes: receives one line per part of the file read more cheaply or left out (a limit hit,
            pages without text and no OCR engine).
        data: the file's bytes when the caller read them already (with `rag.indexing.file_read`); else
            they are read here, once, without following a link or blocking (a FIFO, a device, a symlink
            swapped in after the walk are refused).

    Raises:
        LoaderError: unsupported type, too large, binary, empty, encrypted or corrupt file, not a regular
            file (FIFO, device, a symbolic link where the walk saw a file).

    Example:
        >>> docs = load_file("README.md")         # doctest: +SKIP
        >>> docs[0].metadata["title"]             # doctest: +SKIP
        'rag'
    """
    path = Path(path)
    limits = limits if limits is not None else LoadLimits(tables=tables)
    max_bytes = limits.max_bytes if max_bytes is None else max_bytes
    notes = notes if notes is not None else []
    loader = loader_for(path.suffix)
    if loader is None:
        raise LoaderError(unsupported_reason(path))
    if data is not None and not 0 < len(data) <= max_bytes:
        raise LoaderError(f"{path_text(path)}: " + (f"{len(data):,} bytes is more than max_bytes={max_bytes:,}"
                                                    if data else "empty file"))
    if is_builtin(loader):   # read once, from one descriptor (`rag.indexing.file_read`)
        data = read_file(path, max_bytes=max_bytes).data if data is None else data
        docs = loader(path, limits=limits, notes=notes, data=data)
    else:   # a plugin opens the file by its name: refused first if it is no longer a regular file of the size
        check_file(path, max_bytes=max_bytes)
        docs = _completed(path, loader(path, limits=limits, notes=notes), loader)
    if not any(d.page_content.strip() for d in docs):
        unread = next((n for n in notes if "OCR" in n), None)
        raise LoaderError(f"{path_text(path)}: no text found (" + (
            f"a scanned PDF without a text layer; {unread.split(': ', 1)[1]}" if unread
            else "blank file, or a scanned PDF without a text layer") + ")")
    return docs


def _completed(path: Path, docs: Any, loader: Any) -> list[Document]:
    """A plugin loader's documents checked, their text made safe, `source`, `title` and `file_type` filled in."""
    if not isinstance(docs, list) or not all(isinstance(d, Document) for d in docs):
        raise LoaderError(f"{path_text(path)}: the {path.suffix.lower()} loader {getattr(loader, '__name__', loader)!r} "
                          f"returned {type(docs).__name__}, not a list of Documents")
    defaults = {"source": path_text(path), "title": path_text(path.stem), "file_type": path.suffix.lower()[1:]}
    return [Document(page_content=clean_text(d.page_content), id=d.id, metadata={**defaults, **d.metadata})
            for d in docs]


def unsupported_reason(path: str | Path) -> str:
    """Why a file was not read, for a report: its type, and the types that are read.

    Example:
        >>> unsupported_reason("notes/a.csv.gz")
        'notes/a.csv.gz: unsupported file type .gz (compressed files are not opened); supported: .txt, .md, .markdown, .rst, .html, .htm, .pdf, .png, .jpg, .jpeg, .tif, .tiff'
    """
    suffix = Path(path).suffix.lower()
    why = " (compressed files are not opened)" if suffix in _COMPRESSED else ""
    return f"{path}: unsupported file type {suffix or '(no suffix)'}{why}; supported: {', '.join(supported_suffixes())}"


def _as_patterns(patterns: str | Sequence[str]) -> tuple[str, ...]:
    return (patterns,) if isinstance(patterns, str) else tuple(patterns)


def _matches(rel: str, patterns: Sequence[str]) -> bool:
    name = rel.rsplit("/", 1)[-1]
    for pattern in patterns:
        if fnmatch(rel, pattern) or fnmatch(name, pattern):
            return True
        # "**/x" also matches x at the top level, as users expect from shell globs.
        if pattern.startswith("**/") and fnmatch(rel, pattern[3:]):
            return True
    return False


def iter_files(path: str | Path, *, include: str | Sequence[str] = "**/*", exclude: str | Sequence[str] = (),
               follow_symlinks: bool = False, skipped: list[Skipped] | None = None) -> Iterator[tuple[Path, bool]]:
    """Files under `path` matching an `include` glob and no `exclude` glob, sorted.

    Yields `(file, supported)`; hidden files and folders (starting with ".") are left out.
    Globs match the path relative to `path` (posix separators) or the bare file name.
    A symlink under `path` whose target lies outside `path` is not followed unless
    `follow_symlinks=True`; it is appended to `skipped` with the reason. Links that stay inside
    `path` are followed for files (their target is indexed once) and not for folders (their
    content is reached anyway). A link that is followed is yielded as its target: files are then
    opened without following links (`rag.indexing.file_read`), so a file replaced by a link after
    the walk is refused, not read through.

    Raises:
        LoaderError: `path` does not exist.
    """
    root = Path(path)
    if not root.exists():
        raise LoaderError(f"{path_text(root)}: no such file or directory")
    if root.is_file():
        yield root.resolve() if root.is_symlink() else root, loader_for(root.suffix) is not None
        return
    includes, excludes = _as_patterns(include), _as_patterns(exclude)
    for listed, file in sorted(_walk(root, follow_symlinks, skipped if skipped is not None else [])):
        rel = listed.relative_to(root).as_posix()
        if not _matches(rel, includes) or _matches(rel, excludes):
            continue
        yield file, loader_for(listed.suffix) is not None


def _target(link: Path, real_root: Path, root: Path) -> Path:
    """What a link the walk accepts leads to, under `root` as given when it is inside it: the file that is read
    (it is opened without following a link, so a link swapped in after the walk is refused)."""
    target = link.resolve()
    return root / target.relative_to(real_root) if real_root in target.parents else target


def _walk(root: Path, follow_symlinks: bool, skipped: list[Skipped]) -> Iterator[tuple[Path, Path]]:
    """Regular files under `root`, not hidden, as (the name listed, the file to read: a link's target); symlinks
    leaving `root` only when `follow_symlinks`."""
    real_root = root.resolve()
    visited = {real_root}

    def outside(link: Path) -> bool:
        target = link.resolve()
        return target != real_root and real_root not in target.parents

    def refuse(link: Path, kind: str) -> None:
        skipped.append(Skipped(path_text(link), f"{path_text(link)}: symlink to the {kind} "
                                                f"{path_text(os.readlink(link))} outside {path_text(root)}; not "
                                                "followed (rag index --follow-symlinks, or follow_symlinks=True, "
                                                "indexes it)"))

    for dirpath, dirnames, filenames in os.walk(root, followlinks=follow_symlinks):
        here = Path(dirpath)
        kept = []
        for name in dirnames:
            sub = here / name
            if name.startswith("."):
                continue
            if sub.is_symlink():
                if not follow_symlinks:
                    if outside(sub):
                        refuse(sub, "folder")
                    continue
                if sub.resolve() in visited:  # a loop, or a folder reached twice
                    continue
                visited.add(sub.resolve())
            kept.append(name)
        dirnames[:] = kept
        for name in filenames:
            file = here / name
            if name.startswith("."):
                continue
            if file.is_symlink() and not follow_symlinks and file.exists() and outside(file):
                refuse(file, "file")
                continue
            if file.is_file():
                yield file, _target(file, real_root, root) if file.is_symlink() else file


def load_directory(path: str | Path, *, include: str | Sequence[str] = "**/*",
                   exclude: str | Sequence[str] = (), glob: str | None = None,
                   max_bytes: int | None = None, follow_symlinks: bool = False,
                   limits: LoadLimits | None = None) -> LoadReport:
    """Load every supported file under `path` (or `path` itself when it is a file).

    Args:
        path: a directory or a single file.
        include: glob(s) a file must match, e.g. `"**/*.pdf"` or `["*.md", "guides/*"]`.
        exclude: glob(s) that leave a file out, e.g. `["drafts/*", "*.tmp.md"]`.
        glob: older name of `include` (kept for compatibility).
        max_bytes: larger files are skipped with a reason (default `limits.max_bytes`, 256 MiB).
        follow_symlinks: also load what symlinks pointing outside `path` lead to (by default
            they are skipped with a reason).
        limits: per-file cost limits and OCR settings (`LoadLimits`); what hits one is in `notes`.

    Returns:
        The documents, the skipped files with reasons, and counts.

    Raises:
        LoaderError: `path` does not exist.

    Example:
        >>> report = load_directory("reports", include="**/*.pdf")   # doctest: +SKIP
        >>> [s.reason for s in report.skipped]                       # doctest: +SKIP
        ['reports/locked.pdf: the PDF is encrypted (password-protected); remove the password to index it']
    """
    report = LoadReport()
    for file, supported in iter_files(path, include=glob or include, exclude=exclude,
                                      follow_symlinks=follow_symlinks, skipped=report.skipped):
        if not supported:
            report.unsupported.append(path_text(file))
            continue
        report.files += 1
        notes: list[str] = []
        try:
            report.documents.extend(load_file(file, max_bytes=max_bytes, limits=limits, notes=notes))
            report.notes += [Note(path_text(file), note) for note in notes]  # a skipped file's reason says it all
        except LoaderError as exc:
            report.skipped.append(Skipped(path_text(file), str(exc)))
        except Exception as exc:  # noqa: BLE001 - one bad file must not stop the walk; reported below
            report.skipped.append(Skipped(path_text(file), f"{path_text(file)}: {type(exc).__name__}: {exc}"))
    return report
