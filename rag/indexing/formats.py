"""Loaders by file suffix and chunkers by document type: the extension points of indexing.

A **loader** turns one file into Documents; a **chunker** turns documents into chunks. The
library's own loaders read .txt, .md, .markdown, .rst, .html, .htm, .pdf and images (.png,
.jpg, .jpeg, .tif, .tiff, by OCR); every document's chunks come from the knowledge base's
chunker (`TokenChunker` by default). A new format needs no change to the library:

- in Python, `register_loader(".xyz", load_xyz)` and, if its documents need their own chunking,
  `register_chunker("xyz", XyzChunker())` (keyed by the documents' `metadata["file_type"]`,
  which is the suffix without its dot unless the loader sets it);
- for `rag index` and every other process, an installed distribution declares entry points in
  the groups `rag.loaders` (name: the suffix) and `rag.chunkers` (name: the file type), e.g. in
  its pyproject.toml::

      [project.entry-points."rag.loaders"]
      xyz = "xyz_rag:load_xyz"

  rag imports them the first time it looks a suffix up. Only installed code is ever imported:
  a config file or a command-line option never names a module to import.

Precedence: `register_loader` > an entry point > the built-in loader of the suffix (so an
installed plugin may replace, say, the PDF loader). Two entry points for one name are a
`ConfigError`, as is one that cannot be imported.

A loader is any callable `loader(path, *, limits, notes) -> list[Document]` (`Loader`): `limits`
is the `LoadLimits` of the run (cost limits, OCR settings), `notes` a list for one line per part
of the file read more cheaply or left out. `load_file` checks the size before it calls the loader
and the result after: a `Document` list with some text; `source`, `title` and `file_type` are
filled in when the loader leaves them out. A chunker is an object with `split_documents(docs)` and
`settings()` (`Chunker`), numbering each document's chunks (`doc_id`, `chunk_index`).

Example:
    >>> from langchain_core.documents import Document
    >>> def load_upper(path, *, limits, notes):
    ...     return [Document(page_content=path.read_text().upper())]
    >>> register_loader(".up", load_upper)
    >>> ".up" in supported_suffixes()
    True
    >>> unregister_loader(".up")
    >>> ".up" in supported_suffixes()
    False
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from langchain_core.documents import Document

from rag.base.errors import ConfigError, short_repr
from rag.indexing.limits import LoadLimits
from rag.indexing.pdf import IMAGE_SUFFIXES, load_image, load_pdf
from rag.indexing.text_files import TEXT_SUFFIXES, load_text, read_bytes

__all__ = ["BUILTIN_SUFFIXES", "CHUNKER_GROUP", "LOADER_GROUP", "Chunker", "Loader", "chunk_documents",
           "chunker_for", "is_builtin", "loader_for", "register_chunker", "register_loader", "supported_suffixes",
           "unregister_chunker", "unregister_loader"]

LOADER_GROUP = "rag.loaders"
CHUNKER_GROUP = "rag.chunkers"
_SUFFIX = re.compile(r"\.[a-z0-9][a-z0-9_+-]{0,31}", re.ASCII | re.IGNORECASE)
_TYPE = re.compile(r"[a-z0-9][a-z0-9_+-]{0,31}", re.ASCII | re.IGNORECASE)


@runtime_checkable
class Loader(Protocol):
    """Reads one file: `loader(path, *, limits, notes) -> list[Document]` (a function will do)."""

    def __call__(self, path: Path, *, limits: LoadLimits, notes: list[str]) -> list[Document]: ...


@runtime_checkable
class Chunker(Protocol):
    """Splits documents into chunks numbered per document (`doc_id`, `chunk_index` in their metadata)."""

    def split_documents(self, docs: Sequence[Document]) -> list[Document]: ...

    def settings(self) -> dict[str, Any]:
        """The settings as data (a knowledge base records its chunker's)."""
        ...


def _load_image_file(path: Path, *, limits: LoadLimits, notes: list[str], data: bytes | None = None) -> list[Document]:
    return load_image(path, read_bytes(path, max_bytes=limits.max_bytes) if data is None else data, limits=limits)


_BUILTIN: dict[str, Loader] = {**dict.fromkeys(TEXT_SUFFIXES, load_text), ".pdf": load_pdf,
                               **dict.fromkeys(IMAGE_SUFFIXES, _load_image_file)}
#: The suffixes the library reads by itself.
BUILTIN_SUFFIXES = tuple(_BUILTIN)
_loaders: dict[str, Loader] = {}
_chunkers: dict[str, Chunker] = {}


def _suffix(suffix: Any) -> str:
    key = ("." + suffix.lstrip(".") if isinstance(suffix, str) and not suffix.startswith(".") else suffix)
    if not isinstance(key, str) or not _SUFFIX.fullmatch(key):
        raise ConfigError(f"a loader's suffix is one dot and up to 32 letters, digits, '_', '+' or '-' (the part "
                          f"after a file's last dot, e.g. '.xyz'), got {short_repr(suffix)}")
    return key.lower()


def _file_type(name: Any) -> str:
    if not isinstance(name, str) or not _TYPE.fullmatch(name):
        raise ConfigError(f"a chunker's file type is up to 32 letters, digits, '_', '+' or '-' (a document's "
                          f"metadata['file_type'], e.g. 'xyz' or 'pdf'), got {short_repr(name)}")
    return name.lower()


def _instance(obj: Any) -> Any:
    return obj() if isinstance(obj, type) else obj


def register_loader(suffix: str, loader: Loader, *, replace: bool = False) -> None:
    """Read files ending in `suffix` with `loader` (in this process; see the module docstring).

    Raises:
        ConfigError: a bad suffix, a loader that is not callable, or a suffix already read by a
            built-in or registered loader without `replace=True`.
    """
    key = _suffix(suffix)
    if not callable(loader):
        raise ConfigError(f"a loader is a callable loader(path, *, limits, notes) -> list[Document], got "
                          f"{type(loader).__name__}")
    if not replace and (key in _loaders or key in _BUILTIN):
        raise ConfigError(f"{key} files already have a loader; pass replace=True to read them with this one")
    _loaders[key] = loader


def unregister_loader(suffix: str) -> None:
    """Forget the loader `register_loader` set for `suffix` (entry points and built-ins stay)."""
    _loaders.pop(_suffix(suffix), None)


def register_chunker(file_type: str, chunker: Chunker, *, replace: bool = False) -> None:
    """Chunk documents whose `metadata["file_type"]` is `file_type` with `chunker` (in this process).

    Raises:
        ConfigError: a bad file type, an object without `split_documents` and `settings`, or a
            file type that already has a chunker without `replace=True`.
    """
    key = _file_type(file_type)
    if not isinstance(chunker, Chunker):
        raise ConfigError(f"a chunker has split_documents(docs) and settings(), got {type(chunker).__name__}")
    if not replace and key in _chunkers:
        raise ConfigError(f"{key!r} documents already have a chunker; pass replace=True to use this one")
    _chunkers[key] = chunker


def unregister_chunker(file_type: str) -> None:
    """Forget the chunker `register_chunker` set for `file_type` (entry points stay)."""
    _chunkers.pop(_file_type(file_type), None)


@functools.cache
def _installed(group: str) -> dict[str, Any]:
    """The objects the installed distributions' entry points of `group` name, imported once."""
    from importlib.metadata import entry_points

    found: dict[str, tuple[Any, str]] = {}
    for point in entry_points(group=group):
        origin = f"the {group} entry point {point.name} = {point.value}" + (
            f" of {point.dist.name}" if point.dist is not None else "")
        key = _suffix(point.name) if group == LOADER_GROUP else _file_type(point.name)
        if key in found and found[key][1] != point.value:
            raise ConfigError(f"{origin} and {found[key][1]} both handle {key}; uninstall one of them")
        try:
            obj = _instance(point.load())
        except Exception as exc:  # noqa: BLE001 - whatever a broken plugin raises, say which one it is
            raise ConfigError(f"{origin} cannot be loaded: {type(exc).__name__}: {exc}") from exc
        if not (callable(obj) if group == LOADER_GROUP else isinstance(obj, Chunker)):
            raise ConfigError(f"{origin} is not a {'loader' if group == LOADER_GROUP else 'chunker'} "
                              f"(see rag.indexing.formats), got {type(obj).__name__}")
        found[key] = (obj, point.value)
    return {key: obj for key, (obj, _) in found.items()}


def loader_for(suffix: str) -> Loader | None:
    """The loader of files ending in `suffix` (case-insensitive), or None when none reads them."""
    key = suffix.lower()
    return _loaders.get(key) or _installed(LOADER_GROUP).get(key) or _BUILTIN.get(key)


def is_builtin(loader: Any) -> bool:
    """Whether `loader` is one of the library's own (their documents are complete and clean already)."""
    return any(loader is own for own in _BUILTIN.values())


def supported_suffixes() -> tuple[str, ...]:
    """Every suffix a loader reads: the built-in ones, then the installed and registered ones, sorted."""
    extra = (set(_installed(LOADER_GROUP)) | set(_loaders)) - set(_BUILTIN)
    return (*BUILTIN_SUFFIXES, *sorted(extra))


def chunker_for(file_type: str) -> Chunker | None:
    """The chunker registered or installed for documents of `file_type`, or None (the knowledge base's own)."""
    key = file_type.lower()
    return _chunkers.get(key) or _installed(CHUNKER_GROUP).get(key)


def chunk_documents(default: Chunker, docs: Sequence[Document]) -> list[Document]:
    """Chunks of `docs`, in order: each run of documents of one type by its chunker, else by `default`.

    Raises:
        ConfigError: a registered chunker returned something other than Documents numbered per document.
    """
    if not _chunkers and not _installed(CHUNKER_GROUP):
        return default.split_documents(docs)
    out: list[Document] = []
    run: list[Document] = []
    current: Chunker = default
    for doc in docs:
        chunker = chunker_for(str(doc.metadata.get("file_type", ""))) or default
        if chunker is not current and run:
            out += _checked(current, default, run)
            run = []
        current = chunker
        run.append(doc)
    if run:
        out += _checked(current, default, run)
    return out


def _checked(chunker: Chunker, default: Chunker, docs: list[Document]) -> list[Document]:
    chunks = chunker.split_documents(docs)
    if chunker is default:
        return chunks
    for chunk in chunks if isinstance(chunks, list) else [chunks]:
        meta = getattr(chunk, "metadata", None)
        if not isinstance(chunk, Document) or not isinstance(meta.get("chunk_index"), int) or "doc_id" not in meta:
            raise ConfigError(f"the chunker {type(chunker).__name__} for {docs[0].metadata.get('file_type')!r} "
                              "documents must return a list of Documents with doc_id and an integer chunk_index "
                              f"(numbered per document, as PassthroughChunker does), got {short_repr(chunk)}")
    return chunks
