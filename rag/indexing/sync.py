"""Incremental indexing for `KnowledgeBase`: hash, compare, chunk, embed the misses, write.

For each file: an unchanged size and modification time means unchanged; otherwise the
content hash decides. New and changed documents are processed in groups:

1. they are chunked, tagged, given AutoContext; each chunk's id is a hash of its document,
   position, embedded text and metadata;
2. their records are marked `pending` (a crash from here on makes the next run redo them);
3. only ids the store does not have are embedded (through the embedding cache) and added;
   ids of the document that are no longer produced are deleted;
4. their records are marked `ok` with the new hash and chunk ids.

Steps 2-4 of a group run in one writer thread while the caller loads and chunks the next group
(at most one group in flight), so groups still reach the store one at a time and in order. pdfium,
the Rust tokenizer and torch release the GIL, so loading and chunking overlap with embedding;
chromadb 1.5's add/upsert holds the GIL (measured), so they do not overlap with the store write.
`sync` returns only after the writer has finished, i.e. while the caller still holds the writer lock.

Every step is idempotent, so re-running after a crash converges to exactly the right chunks; a
document whose update was interrupted is marked `updating` (not `pending`), so the re-run reports
it as updated. A new file whose content hash is that of an indexed file that no longer exists has
moved (`rag.indexing.moves`): its chunks are re-pointed, nothing is embedded or written.

One bad file never stops a run: a file that fails to load is skipped with the reason, and text
and metadata are cleaned (`clean_text`) before chunking, so a name or heading with bytes that are
not UTF-8 is stored as `\\xNN` / U+FFFD instead of failing the record write or the tokenizer.

Example:
    >>> report = sync(kb, ["docs/"], cleanup="incremental")      # doctest: +SKIP
    >>> print(report.summary())                                 # doctest: +SKIP
    added 3, updated 0, unchanged 12, moved 0, deleted 0, skipped 1 (...)
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from langchain_core.documents import Document

from rag.base.errors import LoaderError
from rag.base.tracing import index_span
from rag.indexing.chunking import document_id
from rag.indexing.loaders import Note, Skipped, clean_text, iter_files, load_file, path_text
from rag.indexing.moves import move_document, moved_candidates
from rag.indexing.records import WRITING, DocumentRecord
from rag.indexing.report import IndexReport
from rag.indexing.writer import Writer

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from rag.indexing.knowledge_base import KnowledgeStore

__all__ = ["CLEANUP_MODES", "IndexReport", "Source", "chunk_id", "scalar_metadata", "sync"]

Source = Union[str, Path, Document]  # noqa: UP007 - a runtime alias
CLEANUP_MODES = (None, "incremental", "full")
_GROUP_CHARS = 4_000_000  # text per processing group (~5,000 chunks): bounded memory, large writes
_GROUP_DOCS = 5000
_EMBED_BATCH = 512  # chunks per embedding call (and progress event)
_WRITE_BATCH = 5000  # chunks per Chroma add (Chroma 1.5 accepts up to ~5.4k)


@dataclass
class _Prepared:
    """A chunked group, ready for the writer: chunks, embedded texts, metadata and ids."""

    items: list[_Item]
    chunks: list[Document]
    texts: list[str]
    metas: list[dict[str, Any]]
    ids: list[str]
    summaries: dict[str, str]


@dataclass
class _Item:
    key: str
    display: str
    doc_id: str
    content_hash: str
    size: int
    mtime_ns: int
    docs: list[Document]
    status: str  # "added" or "updated"
    known: bool = True  # the records file has an entry for it, so the store may hold chunks of it


def chunk_id(doc_id: str, index: int, embedded_text: str, metadata: dict[str, Any]) -> str:
    """A chunk's store id: a hash of its document, position, embedded text and metadata."""
    payload = json.dumps([doc_id, index, embedded_text, metadata], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()[:32]


#: integers every store keeps exactly (64-bit); Chroma turns larger ones into floats, pgvector's JSON keeps them
_INT64 = (-(2**63), 2**63 - 1)


def scalar_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    """Metadata every store keeps as it is: None dropped, scalars kept, anything else as JSON text.

    A number no store can keep exactly is kept as its text: NaN and infinities (Chroma dropped them,
    Milvus read them back as None, PostgreSQL's JSON refuses them) become "nan", "inf", "-inf", and
    an integer beyond 64 bits its digits (Chroma turned it into an inexact float).
    """
    out: dict[str, Any] = {}
    for key, value in metadata.items():
        if value is None:
            continue
        if isinstance(value, float) and not math.isfinite(value):
            value = str(value)
        elif isinstance(value, int) and not isinstance(value, bool) and not _INT64[0] <= value <= _INT64[1]:
            value = str(value)
        out[str(key)] = value if isinstance(value, str | int | float | bool) else json.dumps(value, default=str)
    return out


def _file_hash(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _docs_hash(docs: Sequence[Document]) -> str:
    payload = json.dumps([[d.page_content, d.metadata] for d in docs], sort_keys=True, default=str)
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()


def sync(kb: KnowledgeStore, sources: Source | Sequence[Source], *, include: str | Sequence[str] = "**/*",
         exclude: str | Sequence[str] = (), cleanup: str | None = None,
         progress: Callable[[str, int], None] | None = None, force: bool = False,
         follow_symlinks: bool = False) -> IndexReport:
    """Bring the knowledge base in line with `sources` (the caller holds the writer lock)."""
    start = time.perf_counter()
    emit = progress or (lambda event, amount: None)
    report = IndexReport()
    _recover(kb)
    records = kb.records.all()
    moves = moved_candidates(records)
    files, roots, grouped = _collect(sources, include=include, exclude=exclude, follow_symlinks=follow_symlinks,
                                     report=report)
    emit("files_total", len(files) + len(grouped))
    seen: set[str] = set()
    touched: list[DocumentRecord] = []
    group: list[_Item] = []
    pending_chars, writer = [0], Writer()

    def flush(force_write: bool = False) -> None:
        size = sum(len(d.page_content) for d in group[-1].docs) if group else 0
        pending_chars[0] += size
        if group and (force_write or len(group) >= _GROUP_DOCS or pending_chars[0] >= _GROUP_CHARS):
            prepared = _prepare(kb, list(group), emit)
            writer.submit(_store, kb, prepared, report, emit)
            group.clear()
            pending_chars[0] = 0

    def take(item: _Item | None) -> None:
        if item is not None:
            group.append(item)
            emit("pages", len(item.docs))
            flush()

    try:
        for file in files:
            key = path_text(file.resolve())
            if key in seen:  # a symlink to a file indexed under its own name
                continue
            seen.add(key)
            moved = len(report.moved)
            item = _file_item(kb, file, key, records.get(key), force, report, touched, writer, moves)
            if len(report.moved) > moved:  # its old record now has this key: not stale
                seen.add(report.moved[-1][0])
            emit("file", 1)
            take(item)
        for key, docs in grouped.items():
            seen.add(key)
            emit("file", 1)
            take(_document_item(key, docs, records.get(key), force, report))
        flush(force_write=True)
        writer.wait()
    finally:
        writer.close()
    kb.records.put_many(touched)
    if stale := _stale(records, seen, roots, cleanup):
        report.chunks_deleted += kb.delete_records(stale)
        report.deleted += [r.source for r in stale]
    report.seconds = time.perf_counter() - start
    return report


def _collect(sources: Source | Sequence[Source], *, include: str | Sequence[str], exclude: str | Sequence[str],
             follow_symlinks: bool, report: IndexReport) -> tuple[list[Path], list[str], dict[str, list[Document]]]:
    """The files to index, the folders given (for incremental cleanup), and Documents grouped by source."""
    items = [sources] if isinstance(sources, str | Path | Document) else list(sources)
    files: list[Path] = []
    roots: list[str] = []
    grouped: dict[str, list[Document]] = {}
    for source in items:
        if isinstance(source, Document):
            key = clean_text(str(source.metadata.get("source") or source.metadata.get("doc_id") or ""))
            grouped.setdefault(key or f"text:{_docs_hash([source])[:16]}", []).append(source)
            continue
        roots.append(path_text(Path(source).resolve()))
        for file, supported in iter_files(source, include=include, exclude=exclude, follow_symlinks=follow_symlinks,
                                          skipped=report.skipped):
            (files if supported else report.unsupported).append(file if supported else path_text(file))
    return files, roots, grouped


def _document_item(key: str, docs: list[Document], rec: DocumentRecord | None, force: bool,
                   report: IndexReport) -> _Item | None:
    """The work item for Documents added under one source, or None when they are unchanged."""
    content_hash = _docs_hash(docs)
    if not force and rec and rec.state == "ok" and rec.content_hash == content_hash:
        report.unchanged.append(key)
        return None
    doc_id = rec.doc_id if rec else clean_text(str(docs[0].metadata.get("doc_id") or document_id(key)))
    status = "updated" if rec and rec.state in ("ok", "updating") else "added"
    return _Item(key, key, doc_id, content_hash, -1, -1, list(docs), status, known=rec is not None)


def _stale(records: dict[str, DocumentRecord], seen: set[str], roots: list[str],
           cleanup: str | None) -> list[DocumentRecord]:
    """Records to delete: every one not seen ("full"), or those under the folders given ("incremental")."""
    if cleanup == "full":
        return [r for k, r in records.items() if k not in seen]
    if cleanup == "incremental":
        return [r for k, r in records.items()
                if k not in seen and any(k == root or k.startswith(root.rstrip(os.sep) + os.sep) for root in roots)]
    return []


def _file_item(kb: KnowledgeStore, file: Path, key: str, rec: DocumentRecord | None, force: bool,
               report: IndexReport, touched: list[DocumentRecord], writer: Writer,
               moves: dict[str, DocumentRecord]) -> _Item | None:
    """The work item for a file, or None when it is unchanged, moved or unreadable (recorded in `report`)."""
    ok = rec is not None and rec.state == "ok" and not force
    display = path_text(file)
    try:
        stat = file.stat()
        if ok and rec.size == stat.st_size and rec.mtime_ns == stat.st_mtime_ns:
            report.unchanged.append(display)
            return None
        content_hash = _file_hash(file)
    except OSError as exc:
        report.skipped.append(Skipped(display, f"{display}: cannot read ({exc.strerror or exc})"))
        return None
    if ok and rec.content_hash == content_hash:  # touched, not changed
        rec.size, rec.mtime_ns = stat.st_size, stat.st_mtime_ns
        touched.append(rec)
        report.unchanged.append(display)
        return None
    # a store that cannot update metadata in place (`can_update`) indexes a moved file anew
    if rec is None and moves.get(content_hash) is not None and kb.chunks.can_update:
        old = moves.pop(content_hash)
        writer.wait()  # one store writer at a time
        move_document(kb, old, key, display, size=stat.st_size, mtime_ns=stat.st_mtime_ns)
        report.moved.append((old.source, display))
        return None
    try:
        with index_span("rag.index.load", file_type=file.suffix.lower().lstrip(".")) as span:
            notes: list[str] = []
            docs = load_file(file, notes=notes)
            report.notes += [Note(display, clean_text(note)) for note in notes]
            span.set_attribute("rag.pages", len(docs))
    except Exception as exc:  # noqa: BLE001 - one bad file never stops a run: it is skipped with the reason
        reason = str(exc) if isinstance(exc, LoaderError) else f"{display}: {type(exc).__name__}: {exc}"
        report.skipped.append(Skipped(display, clean_text(reason)))
        if rec is not None and rec.state in WRITING:  # a half-written earlier attempt: remove it
            writer.wait()  # one store writer at a time
            report.chunks_deleted += kb.delete_records([rec])
        return None
    doc_id = rec.doc_id if rec else document_id(key)
    return _Item(key, display, doc_id, content_hash, stat.st_size, stat.st_mtime_ns, docs,
                 "updated" if rec is not None and rec.state in ("ok", "updating") else "added", known=rec is not None)


def _prepare(kb: KnowledgeStore, items: list[_Item], emit: Callable[[str, int], None]) -> _Prepared:
    """Chunk, tag and add AutoContext to one group (no store access; runs in the caller's thread)."""
    docs = [Document(page_content=clean_text(d.page_content), metadata={**_clean_metadata(d.metadata),
                                                                         "doc_id": i.doc_id})
            for i in items for d in i.docs]
    with index_span("rag.index.chunk", documents=len(items), pages=len(docs)) as span:
        chunks = kb.chunker.split_documents(docs)
        if kb.tagger is not None:
            chunks = kb.tagger(chunks)
        summaries = kb.autocontext.summaries(chunks)
        texts = kb.autocontext.embedding_texts(chunks, summaries=summaries)
        span.set_attribute("rag.chunks", len(chunks))
    metas = [scalar_metadata(c.metadata) for c in chunks]
    ids = [chunk_id(m["doc_id"], m["chunk_index"], t, m) for m, t in zip(metas, texts, strict=True)]
    emit("chunks", len(chunks))
    return _Prepared(items, chunks, texts, metas, ids, summaries)


def _store(kb: KnowledgeStore, prepared: _Prepared, report: IndexReport, emit: Callable[[str, int], None]) -> None:
    """Embed the new chunks of a prepared group and write them (steps 2-4 of the module docstring)."""
    items, chunks, texts, metas, ids, summaries = (prepared.items, prepared.chunks, prepared.texts, prepared.metas,
                                                   prepared.ids, prepared.summaries)
    kb.records.put_many([DocumentRecord(source=i.key, doc_id=i.doc_id, content_hash=i.content_hash,
                                        state="updating" if i.status == "updated" else "pending") for i in items])
    # Chunks are written only after their document's record is marked pending, so a document without a
    # record has nothing in the store: skip the metadata query (costly for large groups) for those.
    doc_ids = [i.doc_id for i in items if i.known]
    existing = set(kb.chunks.get_ids({"doc_id": {"$in": doc_ids}})) if doc_ids else set()
    todo = [n for n, cid in enumerate(ids) if cid not in existing]
    ready: list[tuple[int, list[float]]] = []
    for begin in range(0, len(todo), _EMBED_BATCH):
        batch = todo[begin:begin + _EMBED_BATCH]
        misses = getattr(kb.embedding, "stats", {}).get("misses", 0)
        model = str(getattr(kb.embedding, "model_id", type(kb.embedding).__name__))
        with index_span("rag.index.embed", texts=len(batch), model=model) as span:
            vectors = kb.embedding.embed_documents([texts[n] for n in batch])
            embedded = getattr(kb.embedding, "stats", {}).get("misses", misses + len(batch)) - misses
            span.set_attributes({"rag.embedded": embedded, "rag.cache_hits": len(batch) - embedded})
        kb.record_dimension(len(vectors[0]))
        report.embedded += embedded
        ready += zip(batch, vectors, strict=True)
        emit("embeddings", len(batch))
        # Chroma's cost per call is high: write in large batches.
        if len(ready) >= _WRITE_BATCH or begin + _EMBED_BATCH >= len(todo):
            # `todo` holds only ids the store does not have (known documents were looked up above, new ones
            # have nothing stored), so `add` writes without an existence check.
            with index_span("rag.index.write", chunks=len(ready)):
                kb.chunks.add([ids[n] for n, _ in ready], [v for _, v in ready],
                              [chunks[n].page_content for n, _ in ready], [metas[n] for n, _ in ready])
            report.chunks_added += len(ready)
            ready = []
    stale = sorted(existing - set(ids))
    kb.chunks.delete(stale)
    report.chunks_deleted += len(stale)
    by_doc: dict[str, list[str]] = {}
    for meta, cid in zip(metas, ids, strict=True):
        by_doc.setdefault(meta["doc_id"], []).append(cid)
    titles: dict[str, str] = {}
    for chunk in chunks:
        titles.setdefault(chunk.metadata["doc_id"], str(chunk.metadata.get("title", "")))
    done = []
    for item in items:
        title = titles.get(item.doc_id, "")
        done.append(DocumentRecord(source=item.key, doc_id=item.doc_id, content_hash=item.content_hash,
                                   size=item.size, mtime_ns=item.mtime_ns, chunk_ids=by_doc.get(item.doc_id, []),
                                   pages=len(item.docs), title=title, summary=summaries.get(item.doc_id, "")))
        (report.added if item.status == "added" else report.updated).append(item.display)
        report.pages += len(item.docs)
    kb.records.put_many(done)


def _clean_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    """Metadata with text keys and values safe to store (see `clean_text`)."""
    return {clean_text(k) if isinstance(k, str) else k: clean_text(v) if isinstance(v, str) else v
            for k, v in metadata.items()}


def _forget_lost_store(kb: KnowledgeStore) -> None:
    """Records of chunks a remote collection no longer holds (an empty collection on the server: another
    server, or one whose data was removed) are dropped, so their documents are indexed again."""
    if not kb.remote_store:
        return
    records = kb.records.all()
    if any(r.chunk_ids for r in records.values()) and kb.chunks.count() == 0:
        logger.warning("knowledge base %r: its records list %d document(s) but its %s store is empty: indexing "
                       "them again", kb.name, len(records), kb.backend)
        kb.records.delete(*records)


def _recover(kb: KnowledgeStore) -> None:
    """Finish deletions a killed writer left half done; forget what a remote collection lost."""
    _forget_lost_store(kb)
    interrupted = [r for r in kb.records.all().values() if r.state == "deleting"]
    if interrupted:
        kb.delete_records(interrupted)
