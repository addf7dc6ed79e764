"""One large file goes through a sync in bounded slices (`prepare_stream`): the same chunks, texts and ids as in
one piece, and a failure mid-file leaves no half-recorded document (the re-run repairs it)."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings

import rag.indexing.executors as executors
from rag.compose.knowledge_base import KnowledgeBase
from rag.indexing.autocontext import AutoContext
from rag.indexing.chunking import PassthroughChunker, TokenChunker
from rag.indexing.ingest import Components, Item, prepare, prepare_stream, streamable
from rag.indexing.tags import KeywordTagger
from rag.indexing.tokens import ApproximateTokenizer

_CHUNKER = TokenChunker(chunk_size=32, chunk_overlap=4, tokenizer=ApproximateTokenizer())
_words = st.sampled_from(["revenue", "grew", "Paris", "France", "the", "net", "income", "4%", "2024", "of"])
_paragraph = st.lists(_words, min_size=1, max_size=90).map(" ".join)
_block = st.one_of(_paragraph, _words.map(lambda w: f"# {w.title()}"), _paragraph.map(lambda p: f"## {p[:30]}"))


def _item(text: str, suffix: str = "md") -> Item:
    doc = Document(page_content=text, metadata={"source": f"big.{suffix}", "title": "big", "file_type": suffix})
    return Item("big", "big", "d1", "h", -1, -1, [doc], "added")


@settings(max_examples=40, deadline=None)
@given(blocks=st.lists(_block, min_size=0, max_size=60), batch=st.integers(1, 40), autocontext=st.booleans(),
       tags=st.booleans())
def test_a_streamed_file_gets_the_chunks_texts_and_ids_of_one_piece(blocks, batch, autocontext, tags):
    components = Components(_CHUNKER, KeywordTagger(vocabulary=["revenue", "paris"]) if tags else None,
                            AutoContext(enabled=autocontext))
    item = _item("\n\n".join(blocks))
    assert streamable(components, item)
    whole = prepare(components, [item])
    parts = list(prepare_stream(components, item, batch=batch))
    assert all(len(p.ids) <= max(batch, 1) or p is parts[0] for p in parts)
    assert [i for p in parts for i in p.ids] == whole.ids
    assert [t for p in parts for t in p.texts] == whole.texts
    assert [m for p in parts for m in p.metas] == whole.metas
    assert {k: v for p in parts for k, v in p.summaries.items()} == whole.summaries


def test_the_summary_waits_for_the_start_of_the_document_then_slices_stay_bounded():
    text = "\n\n".join(f"Paragraph {n} says the revenue of unit {n} grew by {n % 7} percent this year." * 3
                       for n in range(600))
    components = Components(_CHUNKER, None, AutoContext())
    parts = list(prepare_stream(components, _item(text), batch=50))
    assert len(parts[0].ids) >= 50 and all(len(p.ids) <= 50 for p in parts[1:])
    assert [i for p in parts for i in p.ids] == prepare(components, [_item(text)]).ids


def test_what_cannot_stream_is_prepared_in_one_piece():
    item = _item("Paris is in France.")
    assert not streamable(Components(PassthroughChunker(), None, AutoContext()), item)   # no iter_chunks
    assert not streamable(Components(_CHUNKER, KeywordTagger(), AutoContext()), item)   # tags the batch as a whole


class FlakyEmbedding(Embeddings):
    """A deterministic fake that fails on its `fail_at`-th call (a real object, not a mock)."""

    model = "flaky-fake"

    def __init__(self, fail_at: int | None = None) -> None:
        self.inner, self.fail_at, self.calls = DeterministicFakeEmbedding(size=8), fail_at, 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        if self.calls == self.fail_at:
            raise RuntimeError("the embedding server went away")
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)


@pytest.fixture
def big_file(tmp_path, monkeypatch):
    """A markdown file larger than a processing group, and slices of 25 chunks."""
    monkeypatch.setattr(executors, "_GROUP_CHARS", 5_000)
    monkeypatch.setattr(executors, "_WRITE_BATCH", 25)
    rng = random.Random(7)
    words = ["revenue", "grew", "Paris", "France", "net", "income", "segment", "margin"]
    path = tmp_path / "docs" / "big.md"
    path.parent.mkdir()
    path.write_text("\n\n".join(("# Part %d\n\n" % n if n % 10 == 0 else "") +
                                " ".join(rng.choice(words) for _ in range(rng.randint(20, 120))) + "."
                                for n in range(300)))
    return path


def test_a_large_file_is_streamed_with_the_ids_of_an_unstreamed_sync(tmp_path, big_file, monkeypatch):
    kb = KnowledgeBase("big", tmp_path / "streamed", embedding=DeterministicFakeEmbedding(size=8))
    report = kb.add_documents(big_file)
    [record] = kb.list_documents()
    assert report.added == [str(big_file)] and report.chunks_added == len(record.chunk_ids) > 100
    monkeypatch.setattr(executors, "_GROUP_CHARS", 10**9)
    whole = KnowledgeBase("big", tmp_path / "whole", embedding=DeterministicFakeEmbedding(size=8))
    whole.add_documents(big_file)
    [expected] = whole.list_documents()
    assert (record.chunk_ids, record.title, record.summary, record.pages) == \
        (expected.chunk_ids, expected.title, expected.summary, expected.pages)
    assert sorted(kb.chunks.get_ids(None)) == sorted(expected.chunk_ids)


def test_a_failure_mid_file_leaves_no_half_recorded_document_and_the_rerun_repairs_it(tmp_path, big_file):
    home = tmp_path / "store"
    kb = KnowledgeBase("big", home, embedding=FlakyEmbedding(fail_at=3), cache=False)
    with pytest.raises(RuntimeError, match="went away"):
        kb.add_documents(big_file)
    assert kb.list_documents() == []   # not committed: its record is pending
    assert kb.records.get(str(big_file)).state == "pending"
    written = kb.count()
    assert 50 <= written < 100   # the two slices the store acknowledged (the first holds the summary's source)
    kb = KnowledgeBase("big", home, embedding=FlakyEmbedding(), cache=False)
    report = kb.add_documents(big_file)
    [record] = kb.list_documents()
    assert report.added == [str(big_file)] and report.embedded == len(record.chunk_ids) - written
    assert sorted(kb.chunks.get_ids(None)) == sorted(record.chunk_ids)
    assert not kb.add_documents(big_file).changed


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fail_at=st.integers(1, 8))
def test_wherever_the_stream_fails_the_rerun_converges(tmp_path_factory, big_file, fail_at):
    home = tmp_path_factory.mktemp("kb")
    try:
        KnowledgeBase("big", home, embedding=FlakyEmbedding(fail_at=fail_at), cache=False).add_documents(big_file)
    except RuntimeError:
        pass
    kb = KnowledgeBase("big", home, embedding=FlakyEmbedding(), cache=False)
    kb.add_documents(big_file)
    [record] = kb.list_documents()
    assert sorted(kb.chunks.get_ids(None)) == sorted(record.chunk_ids) and record.state == "ok"


# ---------------------------------------------------------------- the Ray executor's tasks stream a large file too
def _task_row(n: int, text: str, name: str) -> dict:
    import json

    meta = {"source": f"{name}.md", "title": name, "file_type": "md"}
    return {"n": n, "key": name, "display": name, "doc_id": f"d{n}", "path": "",
            "pages": json.dumps([[text, meta]]), "existing": "[]"}


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(size=st.integers(40, 400))
def test_a_ray_task_yields_a_large_file_in_bounded_slices_with_the_rows_of_one_piece(size):
    """`ray_chunking.chunk_files` (what a Ray task runs): a large file comes out as frames of at most `size` chunks
    after the summary's source, its facts once, on its last frame; the rows equal those of one piece, and the small
    files around it keep theirs."""
    import json
    import types

    pd = pytest.importorskip("pandas")
    from rag.indexing.ray_chunking import chunk_files, component_settings

    parts = Components(TokenChunker(chunk_size=32, chunk_overlap=4), None, AutoContext())
    task_settings = component_settings(types.SimpleNamespace(components=parts))
    big = "\n\n".join(f"Paragraph {n} says the revenue of unit {n} grew by {n % 7} percent." for n in range(1500))
    batch = pd.DataFrame([_task_row(0, "# Small\n\nRevenue grew.", "a"), _task_row(1, big, "big"),
                          _task_row(2, "# Tiny\n\nIncome fell.", "b")])
    streamed = list(chunk_files(batch, settings=task_settings, stream=(10_000, size)))
    whole = list(chunk_files(batch, settings=task_settings, stream=(10**9, size)))
    assert len(whole) == 1 and len(streamed) > 3
    rows, reference = pd.concat(streamed), whole[0]
    assert rows.drop(columns="info").to_dict("records") == reference.drop(columns="info").to_dict("records")
    big_frames = [f for f in streamed if set(f["n"]) == {1}]
    assert all(len(f) <= size for f in big_frames[1:])
    facts = [json.loads(i) for f in big_frames for i in f["info"] if i]
    assert len(facts) == 1 and bool(big_frames[-1]["info"].iloc[0])   # once, when every chunk id is known
    assert facts[0]["chunk_ids"] == [i for f in big_frames for i in f["id"]]
    assert sorted(filter(None, rows["info"])) == sorted(filter(None, reference["info"]))   # the same facts
