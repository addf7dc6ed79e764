"""A damaged saved BM25 index is a cache miss, never a crash or an unbounded allocation (generated damage).

Each example damages a real saved index of a knowledge base (truncation, flipped bytes, arrays that
do not match index.json, members that claim gigabytes, deep JSON, wrong types) and then searches:
the search answers from the knowledge base's chunks, the index having been built again.
"""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag.base.errors import StoreError
from rag.compose.knowledge_base import KnowledgeBase
from rag.retrieval.bm25_cache import BM25_POINTER, knowledge_base_bm25
from rag.retrieval.lexical import BM25Index

SETTINGS = {"metadata_fields": ["title", "section"]}
TEXTS = ["Rome is in Italy.", "Paris is in France.", "Lisbon is in Portugal."]


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    kb = KnowledgeBase("geo", tmp_path_factory.mktemp("kb"), embedding=DeterministicFakeEmbedding(size=16))
    kb.add_documents([Document(page_content=t, metadata={"source": f"s{i}"}) for i, t in enumerate(TEXTS)])
    return kb


def _saved(kb):
    knowledge_base_bm25(kb, SETTINGS)   # (re)saves a current index
    return kb.home / json.loads((kb.home / BM25_POINTER).read_text())["directory"]


def _npz(arrays: dict[str, np.ndarray], claim: dict[str, int] | None = None) -> bytes:
    out = io.BytesIO()
    np.savez(out, **arrays)
    if not claim:
        return out.getvalue()
    # rewrite a member's .npy header to claim another shape (what a hostile or damaged file does)
    rebuilt = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(out.getvalue())) as src, zipfile.ZipFile(rebuilt, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            name = info.filename[:-4]
            if name in claim:
                header = io.BytesIO()
                np.lib.format.write_array_header_1_0(header, {"descr": np.lib.format.dtype_to_descr(
                    arrays[name].dtype), "fortran_order": False, "shape": (claim[name],)})
                data = header.getvalue() + data[len(data) - arrays[name].nbytes:]
            dst.writestr(info.filename, data)
    return rebuilt.getvalue()


def _search(kb) -> list[str]:
    index = knowledge_base_bm25(kb, SETTINGS)
    return sorted(index.document(i).page_content for i, _ in index.search("Rome Paris Lisbon", k=5))


damage = st.one_of(
    st.tuples(st.just("truncate"), st.sampled_from(["arrays.npz", "index.json"]), st.floats(0, 0.99)),
    st.tuples(st.just("flip"), st.sampled_from(["arrays.npz", "index.json"]), st.integers(0, 10_000)),
    st.tuples(st.just("claim"), st.sampled_from(["ptr", "docs", "weights", "idf"]),
              st.one_of(st.integers(0, 50), st.integers(2**20, 2**31))),
    st.tuples(st.just("arrays"), st.sampled_from(["ptr", "docs", "weights", "idf"]),
              st.sampled_from(["short", "long", "float", "object", "2d", "negative", "huge"])),
    st.tuples(st.just("json"), st.sampled_from(["deep", "types", "misaligned", "list", "vocab"]), st.just(0)),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(change=damage)
def test_a_damaged_saved_index_is_rebuilt_and_search_answers(kb, change):
    folder = _saved(kb)
    kind, target, amount = change
    if kind == "truncate":
        raw = (folder / target).read_bytes()
        (folder / target).write_bytes(raw[: int(len(raw) * amount)])
    elif kind == "flip":
        raw = bytearray((folder / target).read_bytes())
        raw[amount % len(raw)] ^= 0xFF
        (folder / target).write_bytes(bytes(raw))
    elif kind in ("claim", "arrays"):
        with np.load(folder / "arrays.npz") as npz:
            arrays = {k: npz[k] for k in npz.files}
        if kind == "claim":
            (folder / "arrays.npz").write_bytes(_npz(arrays, {target: amount}))
        else:
            a = arrays[target]
            arrays[target] = {"short": a[:-1], "long": np.concatenate([a, a[:1]]), "float": a.astype(np.float64) + 0.5,
                              "object": a.astype(object), "2d": np.stack([a, a]), "negative": -np.abs(a) - 1,
                              "huge": a.astype(np.int64) + 10**9}[amount]
            out = io.BytesIO()
            np.savez(out, **arrays) if amount != "object" else np.savez(out, **arrays, allow_pickle=True)
            (folder / "arrays.npz").write_bytes(out.getvalue())
    else:
        meta = json.loads((folder / "index.json").read_text())
        if target == "deep":
            text = "[" * 100_000 + "]" * 100_000
        elif target == "types":
            text = json.dumps({**meta, "k1": "x", "texts": 3})
        elif target == "misaligned":
            text = json.dumps({**meta, "ids": meta["ids"][:-1]})
        elif target == "vocab":
            text = json.dumps({**meta, "vocab": meta["vocab"][:-1]})
        else:
            text = json.dumps([meta])
        (folder / "index.json").write_text(text)
    assert _search(kb) == sorted(TEXTS)


def test_a_member_claiming_gigabytes_is_refused_before_reading(tmp_path):
    index = BM25Index.from_documents([Document(page_content=t) for t in TEXTS])
    index.save(tmp_path / "saved")
    with np.load(tmp_path / "saved" / "arrays.npz") as npz:
        arrays = {k: npz[k] for k in npz.files}
    (tmp_path / "saved" / "arrays.npz").write_bytes(_npz(arrays, {"docs": 3 * 2**30 // 4}))
    with pytest.raises(StoreError, match="arrays.npz is damaged"):
        BM25Index.load(tmp_path / "saved")


def test_saving_leaves_no_temporary_file(tmp_path):
    BM25Index.from_documents([Document(page_content=t) for t in TEXTS]).save(tmp_path / "saved")
    assert sorted(p.name for p in (tmp_path / "saved").iterdir()) == ["arrays.npz", "index.json"]
    assert [d.page_content for d in BM25Index.load(tmp_path / "saved").get_documents()] == TEXTS
