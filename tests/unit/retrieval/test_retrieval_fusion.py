from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document

from rag.base.errors import ConfigError
from rag.retrieval.fusion import doc_key, fuse


def _d(name: str, **md) -> Document:
    return Document(page_content=f"text {name}", metadata=md, id=name)


def test_rrf_matches_hand_computed_scores():
    dense = [(_d("a"), 0.9), (_d("b"), 0.8), (_d("c"), 0.1)]
    bm25 = [(_d("c"), 12.0), (_d("a"), 3.0)]
    fused = dict((d.id, s) for d, s in fuse({"dense": dense, "bm25": bm25}, method="rrf", k=60))
    assert fused["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert fused["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert fused["b"] == pytest.approx(1 / 62)


def test_convex_normalises_each_list_then_weights():
    dense = [(_d("a"), 0.9), (_d("b"), 0.7), (_d("c"), 0.5)]
    bm25 = [(_d("c"), 10.0), (_d("b"), 5.0), (_d("a"), 0.0)]
    fused = fuse({"dense": dense, "bm25": bm25}, method="convex", weights={"dense": 3, "bm25": 1})
    scores = {d.id: s for d, s in fused}
    assert scores["a"] == pytest.approx(0.75 * 1.0 + 0.25 * 0.0)
    assert scores["b"] == pytest.approx(0.75 * 0.5 + 0.25 * 0.5)
    assert scores["c"] == pytest.approx(0.75 * 0.0 + 0.25 * 1.0)
    assert [d.id for d, _ in fused] == ["a", "b", "c"]


def test_scores_of_every_list_are_kept_on_metadata():
    fused = fuse({"dense": [(_d("a"), 0.9)], "bm25": [(_d("a"), 4.0)]}, method="rrf")
    doc, score = fused[0]
    assert doc.metadata["scores"] == {"dense": 0.9, "bm25": 4.0, "rrf": score}
    assert doc.metadata["score"] == score


def test_same_chunk_without_id_is_merged_by_doc_id_and_index():
    a1 = Document(page_content="x", metadata={"doc_id": "D", "chunk_index": 3})
    a2 = Document(page_content="x (other copy)", metadata={"doc_id": "D", "chunk_index": 3})
    assert doc_key(a1) == doc_key(a2)
    assert len(fuse({"one": [(a1, 1.0)], "two": [(a2, 2.0)]})) == 1


def test_bad_method_and_weights_list_valid_choices():
    with pytest.raises(ConfigError, match="valid: rrf, convex"):
        fuse({"a": []}, method="max")
    with pytest.raises(ConfigError, match="valid: a"):
        fuse({"a": []}, weights={"b": 1.0})


def test_equal_scores_share_a_rank_so_the_engines_order_between_them_does_not_matter():
    # the case two backends disagreed on: b and c tie in bm25, one engine listing b first, the other c
    dense = [(_d("a"), 0.9), (_d("b"), 0.8), (_d("c"), 0.1)]
    one = fuse({"dense": dense, "bm25": [(_d("b"), 5.0), (_d("a"), 2.0), (_d("c"), 2.0)]}, shared_ties=True)
    other = fuse({"dense": dense, "bm25": [(_d("b"), 5.0), (_d("c"), 2.0), (_d("a"), 2.0)]}, shared_ties=True)
    assert [(d.id, s) for d, s in one] == [(d.id, s) for d, s in other]
    # a and b tie on fused score (ranks 1+2 and 2+1); the first list's rank orders them
    assert [d.id for d, _ in one] == ["a", "b", "c"]


_scores = st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0]), min_size=1, max_size=8)


@settings(max_examples=60, deadline=None)
@given(dense=_scores, lexical=_scores, method=st.sampled_from(["rrf", "convex"]), seed=st.randoms())
def test_the_fused_order_does_not_depend_on_the_order_of_tied_hits(dense, lexical, method, seed):
    def scored(scores, prefix):
        hits = [(_d(f"{prefix}{i % 5}"), s) for i, s in enumerate(sorted(scores, reverse=True))]
        seen: set[str] = set()
        return [h for h in hits if not (h[0].id in seen or seen.add(h[0].id))]

    def shuffled_ties(hits):
        groups: dict[float, list] = {}
        for hit in hits:
            groups.setdefault(hit[1], []).append(hit)
        out = []
        for score in sorted(groups, reverse=True):
            group = groups[score][:]
            seed.shuffle(group)
            out.extend(group)
        return out

    lists = {"dense": scored(dense, "x"), "bm25": scored(lexical, "x")}
    expected = [(d.id, s) for d, s in fuse(lists, method=method, shared_ties=True)]
    again = fuse({name: shuffled_ties(hits) for name, hits in lists.items()}, method=method, shared_ties=True)
    assert [(d.id, s) for d, s in again] == expected


def test_without_shared_ties_a_lists_order_is_its_ranking():
    # a retriever's order between equal scores is its ranking: the plain interleave keeps it
    a = [(_d("a0"), 1.0), (_d("a1"), 1.0)]
    b = [(_d("b0"), 1.0), (_d("b1"), 1.0)]
    assert [d.id for d, _ in fuse({"a": a, "b": b})] == ["a0", "b0", "a1", "b1"]
    assert [d.id for d, _ in fuse({"a": a, "b": b}, shared_ties=True)] == ["a0", "a1", "b0", "b1"]
