"""The stages of the one ingest path, as functions both executors run: load, prepare, embed, commit.

`rag.indexing.sync` decides what changed (on the driver) and hands the changed documents to an
executor (`rag.indexing.executors`): the local one runs these stages in this process, the Ray one
(`rag.indexing.ray_executor`) runs `load_item` and `prepare` in Ray tasks and `embed_texts` in an
actor pool, on as many machines as the cluster has. The stages know nothing of the store's records
(`begin_items` and `finish_items` write those, always on the driver, which holds the writer lock).

A prepared chunk's id is a hash of its document, position, embedded text and metadata
(`chunk_id`), so every executor gives the same ids for the same input, and a store write of
those ids is idempotent.

Example:
    >>> from langchain_core.documents import Document
    >>> from rag.indexing.autocontext import AutoContext
    >>> from rag.indexing.chunking import PassthroughChunker
    >>> item = Item("k", "k", "d1", "h", -1, -1, [Document(page_content="Paris.", metadata={"source": "k"})], "added")
    >>> prepared = prepare(Components(PassthroughChunker(), None, AutoContext(enabled=False)), [item])
    >>> prepared.texts, len(prepared.ids[0])
    (['Paris.'], 32)
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.documents import Document

from rag.base.errors import LoaderError
from rag.base.text import neutralise_citation_markers
from rag.base.tracing import index_span
from rag.indexing.access import AccessRules, stamp_metadatas
from rag.indexing.autocontext import SUMMARY_SOURCE_CHARS
from rag.indexing.formats import Chunker, chunk_documents, chunker_for
from rag.indexing.loaders import LoadLimits, clean_text, load_file
from rag.indexing.records import DocumentRecord, RecordStore
from rag.indexing.report import IndexReport

__all__ = ["Components", "Done", "Item", "Prepared", "begin_items", "chunk_id", "docs_hash", "done_of", "embed_texts",
           "file_hash", "finish_items", "load_item", "prepare", "prepare_stream", "scalar_metadata", "streamable"]


@dataclass
class Item:
    """A document to index: its record key, how it is shown, ids, hash, and (once loaded) its pages."""

    key: str
    display: str
    doc_id: str
    content_hash: str
    size: int
    mtime_ns: int
    docs: list[Document] | None   # None: a file not loaded yet (`path`)
    status: str  # "added" or "updated"
    known: bool = True  # the records file has an entry for it, so the store may hold chunks of it
    path: Path | None = None
    notes: list[str] = field(default_factory=list)   # what loading read more cheaply or left out
    data: bytes | None = field(default=None, repr=False)   # the file's bytes the plan read (and hashed), until loaded
    source_state: str = ""   # what a source keeps with the record between syncs (`SourceItem.state`)


@dataclass
class Prepared:
    """Chunked documents, ready to embed: chunks, embedded texts, metadata and ids."""

    items: list[Item]
    chunks: list[Document]
    texts: list[str]
    metas: list[dict[str, Any]]
    ids: list[str]
    summaries: dict[str, str]


@dataclass
class Components:
    """What turns files into chunks and embedded texts: the knowledge base's chunker, tagger, AutoContext, the
    run's `LoadLimits` (what reading one file may cost) and the run's `AccessRules` (who may read each document)."""

    chunker: Chunker
    tagger: Any
    autocontext: Any
    limits: LoadLimits = field(default_factory=LoadLimits)
    access: AccessRules = field(default_factory=AccessRules)


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


def file_hash(path: Path) -> str:
    """The SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def docs_hash(docs: Sequence[Document]) -> str:
    """The SHA-256 of Documents' texts and metadata."""
    payload = json.dumps([[d.page_content, d.metadata] for d in docs], sort_keys=True, default=str)
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()


def load_item(item: Item, limits: LoadLimits | None = None) -> str | None:
    """Load a file item's pages into `item.docs` within `limits`; the reason it cannot be read, or None when it was
    loaded (what hit a limit is in `item.notes`).

    One bad file never stops a run: any error is returned as the reason (as `report.skipped` shows it).
    """
    if item.docs is not None:
        return None
    try:
        with index_span("rag.index.load", file_type=item.path.suffix.lower().lstrip(".")) as span:
            data, item.data = item.data, None   # (the bytes the plan hashed are the bytes read)
            item.docs = load_file(item.path, limits=limits, notes=item.notes, data=data)
            span.set_attribute("rag.pages", len(item.docs))
    except Exception as exc:  # noqa: BLE001 - one bad file never stops a run: it is skipped with the reason
        reason = str(exc) if isinstance(exc, LoaderError) else f"{item.display}: {type(exc).__name__}: {exc}"
        return clean_text(reason)
    return None


#: A file with this much text is prepared in slices (`prepare_stream`) rather than in one piece, by either executor.
STREAM_CHARS = 4_000_000
#: Chunks per slice of a streamed file (about one store write).
STREAM_BATCH = 5000


def item_chars(item: Item) -> int:
    """The characters of text a loaded item holds."""
    return sum(len(d.page_content) for d in item.docs or ())


def prepare(components: Components, items: list[Item]) -> Prepared:
    """Chunk, tag and add AutoContext to loaded items (no store access): the chunks, texts and ids."""
    docs = _documents(items)
    with index_span("rag.index.chunk", documents=len(items), pages=len(docs)) as span:
        chunks = chunk_documents(components.chunker, docs)
        if components.tagger is not None:
            chunks = components.tagger(chunks)
        summaries = components.autocontext.summaries(chunks)
        span.set_attribute("rag.chunks", len(chunks))
    return _prepared(components, items, chunks, summaries)


def streamable(components: Components, item: Item) -> bool:
    """Whether `prepare_stream` gives the item the chunks and ids `prepare` would: the chunker makes chunks one at a
    time (`iter_chunks`), no registered chunker takes its documents, and a tagger tags each chunk on its own."""
    tagger = components.tagger
    return (hasattr(components.chunker, "iter_chunks")
            and (tagger is None or getattr(tagger, "vocabulary", None) is not None)
            and not any(chunker_for(str(d.metadata.get("file_type", ""))) for d in item.docs or ()))


def streams(components: Components, item: Item, chars: int = STREAM_CHARS) -> bool:
    """Whether an executor prepares the loaded item in slices (`prepare_stream`): it holds `chars` characters of
    text or more, and `streamable` gives it the chunks of one piece."""
    return item_chars(item) >= chars and streamable(components, item)


def prepare_stream(components: Components, item: Item, *, batch: int) -> Iterator[Prepared]:
    """`prepare` of one large item in slices of `batch` chunks, with the same chunks, texts and ids (see `streamable`).

    The summary reads the document's first chunks (`SUMMARY_SOURCE_CHARS`), so chunks are held until those are
    read; after that at most `batch` chunks (and their texts) are in memory at a time.
    """
    docs = _documents([item])
    held: list[Document] = []
    chars, summaries = 0, None
    with index_span("rag.index.chunk", documents=1, pages=len(docs), streamed=True) as span:
        count = 0
        for chunk in components.chunker.iter_chunks(docs):
            held.append(chunk)
            count += 1
            if summaries is None:
                chars += len(chunk.page_content)
                if chars < SUMMARY_SOURCE_CHARS:
                    continue
                summaries = components.autocontext.summaries(held)
            if len(held) >= batch:
                yield _prepared(components, [item], _tagged(components, held), summaries)
                held = []
        if held or summaries is None:
            yield _prepared(components, [item], _tagged(components, held),
                            summaries if summaries is not None else components.autocontext.summaries(held))
        span.set_attribute("rag.chunks", count)


def _tagged(components: Components, chunks: list[Document]) -> list[Document]:
    return chunks if components.tagger is None else components.tagger(chunks)


def _documents(items: list[Item]) -> list[Document]:
    """The items' pages with text and metadata safe to store, and their `doc_id`; citation markers already in the
    text ("France.[2]") made inert (`neutralise_citation_markers`: the answer's citations are the product's alone)."""
    return [Document(page_content=neutralise_citation_markers(clean_text(d.page_content)),
                     metadata={**_clean_metadata(d.metadata), "doc_id": i.doc_id})
            for i in items for d in i.docs or ()]


def _prepared(components: Components, items: list[Item], chunks: list[Document],
              summaries: dict[str, str]) -> Prepared:
    texts = components.autocontext.embedding_texts(chunks, summaries=summaries)
    firsts = {i.doc_id: (i.key, i.docs[0].metadata if i.docs else {}) for i in items}
    metas = stamp_metadatas(components.access, firsts, [scalar_metadata(c.metadata) for c in chunks])
    ids = [chunk_id(m["doc_id"], m["chunk_index"], t, m) for m, t in zip(metas, texts, strict=True)]
    return Prepared(items, chunks, texts, metas, ids, summaries)


def embed_texts(embedding: Any, texts: list[str]) -> tuple[list[list[float]], int]:
    """Vectors for `texts`, and how many the model computed (a `CachedEmbeddings` counts its misses)."""
    misses = getattr(embedding, "stats", {}).get("misses", 0)
    model = str(getattr(embedding, "model_id", type(embedding).__name__))
    with index_span("rag.index.embed", texts=len(texts), model=model) as span:
        vectors = embedding.embed_documents(texts)
        embedded = getattr(embedding, "stats", {}).get("misses", misses + len(texts)) - misses
        span.set_attributes({"rag.embedded": embedded, "rag.cache_hits": len(texts) - embedded})
    return vectors, embedded


def begin_items(records: RecordStore, items: Sequence[Item]) -> None:
    """Mark the items' records `pending` (new) or `updating` before any chunk of them is written."""
    records.put_many([DocumentRecord(source=i.key, doc_id=i.doc_id, content_hash=i.content_hash,
                                     state="updating" if i.status == "updated" else "pending",
                                     source_state=i.source_state) for i in items])


@dataclass
class Done:
    """A document whose chunks the store acknowledged: its chunk ids in order, title and summary."""

    item: Item
    chunk_ids: list[str]
    title: str
    summary: str
    pages: int


def finish_items(records: RecordStore, done: Sequence[Done], report: IndexReport) -> None:
    """Commit the records of documents whose chunks are all stored (`ok`, with their chunk ids)."""
    committed = []
    for d in done:
        item = d.item
        committed.append(DocumentRecord(source=item.key, doc_id=item.doc_id, content_hash=item.content_hash,
                                      size=item.size, mtime_ns=item.mtime_ns, chunk_ids=d.chunk_ids,
                                      pages=d.pages, title=d.title, summary=d.summary,
                                      source_state=item.source_state))
        (report.added if item.status == "added" else report.updated).append(item.display)
        report.pages += d.pages
    records.put_many(committed)


def done_of(prepared: Prepared) -> list[Done]:
    """Each prepared item as `Done` (its chunk ids in order, the title of its first chunk, its summary)."""
    by_doc: dict[str, list[str]] = {}
    titles: dict[str, str] = {}
    for chunk, meta, cid in zip(prepared.chunks, prepared.metas, prepared.ids, strict=True):
        by_doc.setdefault(meta["doc_id"], []).append(cid)
        titles.setdefault(meta["doc_id"], str(chunk.metadata.get("title", "")))
    return [Done(i, by_doc.get(i.doc_id, []), titles.get(i.doc_id, ""), prepared.summaries.get(i.doc_id, ""),
                 len(i.docs or ())) for i in prepared.items]


def _clean_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    """Metadata with text keys and values safe to store (see `clean_text`)."""
    return {clean_text(k) if isinstance(k, str) else k: clean_text(v) if isinstance(v, str) else v
            for k, v in metadata.items()}
