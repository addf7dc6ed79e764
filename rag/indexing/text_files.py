"""The built-in loader of text files: .txt, .md/.markdown, .rst, .html/.htm, one `Document` each.

Bytes are decoded by their BOM, else as UTF-8, else as cp1252 (the usual legacy encoding of
Western text files); a file whose first 8 KiB are more than a tenth control bytes is binary and
refused. The title is the markdown `#` heading, the html `<title>`/`<h1>` or the rst title
(rst titles become `#` headings, `rag.indexing.rst`), else the file name.

Example:
    >>> from pathlib import Path
    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "a.md"
    >>> _ = path.write_text("# Hello\\n\\nworld")
    >>> doc = load_text(path, limits=None, notes=[])[0]
    >>> doc.metadata["title"], doc.metadata["file_type"]
    ('Hello', 'md')
"""

from __future__ import annotations

import codecs
from pathlib import Path
from typing import Any

from langchain_core.documents import Document

from rag.base.errors import LoaderError
from rag.indexing.file_read import read_file
from rag.indexing.html_text import html_to_text
from rag.indexing.limits import DEFAULT_MAX_BYTES
from rag.indexing.rst import rst_to_markdown
from rag.indexing.text_safety import clean_text, path_text

__all__ = ["TEXT_SUFFIXES", "load_text", "read_bytes"]

TEXT_SUFFIXES = (".txt", ".md", ".markdown", ".rst", ".html", ".htm")
_BINARY_SHARE = 0.10  # share of control bytes in the first 8 KiB above which a text file is binary
_CONTROL = bytes(range(0, 9)) + bytes(range(14, 32))


def read_bytes(path: Path, *, max_bytes: int | None = None) -> bytes:
    """The file's bytes, read once without following a link or blocking (`rag.indexing.file_read`); a
    `LoaderError` naming the file when it cannot be read or is not a regular file of at most `max_bytes`."""
    return read_file(path, max_bytes=DEFAULT_MAX_BYTES if max_bytes is None else max_bytes).data


def _decode(path: Path, data: bytes) -> str:
    for bom, codec in ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"),
                       (codecs.BOM_UTF16_BE, "utf-16")):
        if data.startswith(bom):
            return data.decode(codec, "replace")
    head = data[:8192]
    if head and sum(head.count(b) for b in _CONTROL) / len(head) > _BINARY_SHARE:
        raise LoaderError(f"{path_text(path)}: looks like a binary file (control bytes), not text")
    try:
        # surrogatepass also accepts encoded lone surrogates; clean_text replaces them later.
        return data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        pass
    # Not UTF-8: assume the usual legacy encoding of Western text files.
    return data.decode("cp1252", "replace")


def _markdown_title(text: str) -> str | None:
    """The first `# Heading` line's text (a line scan: a regex here was quadratic on long blank runs)."""
    for line in text.splitlines():
        if line.startswith("#") and line[1:2].isspace() and (title := line[1:].strip().rstrip("#").rstrip()):
            return title
    return None


def load_text(path: Path, *, limits: Any, notes: list[str], data: bytes | None = None) -> list[Document]:
    """A text, markdown, rst or html file as one document (`data`: its bytes when already read; `notes` are not
    needed here)."""
    if data is None:
        data = read_bytes(path, max_bytes=getattr(limits, "max_bytes", None))
    text = clean_text(_decode(path, data))
    title = None
    suffix = path.suffix.lower()
    file_type = "html" if suffix in (".html", ".htm") else suffix.lstrip(".").replace("markdown", "md")
    if file_type == "html":
        text, title = html_to_text(text)
    elif file_type == "md":
        title = _markdown_title(text)
    elif file_type == "rst":
        text, title = rst_to_markdown(text)
    text = clean_text(text)
    return [Document(page_content=text, metadata={"source": path_text(path),
                                                  "title": title or path_text(path.stem), "file_type": file_type})]
