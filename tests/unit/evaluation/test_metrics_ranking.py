from __future__ import annotations

import math

import pytest

from rag.base.errors import ConfigError
from rag.evaluation.metrics import hit_rate, mean_metrics, mrr, ndcg_at_k, recall_at_k

RANKING = ["d3", "d1", "d7", "d2", "d9"]


def test_hit_rate_counts_only_the_top_k():
    assert hit_rate(RANKING, {"d7"}, k=3) == 1.0
    assert hit_rate(RANKING, {"d7"}, k=2) == 0.0
    assert hit_rate(RANKING, {"d8"}) == 0.0


def test_mrr_is_reciprocal_rank_of_first_relevant():
    assert mrr(RANKING, {"d7", "d2"}) == pytest.approx(1 / 3)
    assert mrr(RANKING, {"d2"}, k=3) == 0.0


def test_recall_divides_by_all_relevant_ids():
    assert recall_at_k(RANKING, {"d1", "d2", "d8"}, k=4) == pytest.approx(2 / 3)
    assert recall_at_k(RANKING, {"d1", "d2", "d8"}, k=1) == 0.0
    assert recall_at_k(RANKING, set(), k=3) == 0.0


def test_ndcg_binary_matches_hand_computation():
    # relevant d1 (rank 2) and d2 (rank 4); ideal puts them at ranks 1, 2.
    dcg = 1 / math.log2(3) + 1 / math.log2(5)
    idcg = 1 / math.log2(2) + 1 / math.log2(3)
    assert ndcg_at_k(RANKING, {"d1", "d2"}, k=5) == pytest.approx(dcg / idcg)
    assert ndcg_at_k(RANKING, {"d1", "d2"}, k=5) == pytest.approx(0.6509209298)


def test_ndcg_graded_uses_linear_gain_and_ideal_cut_at_k():
    # grades: d3=1 (rank 1), d7=3 (rank 3), d4=2 (not retrieved); k=3
    dcg = 1 / 1 + 3 / 2
    idcg = 3 / 1 + 2 / math.log2(3) + 1 / 2
    assert ndcg_at_k(RANKING, {"d3": 1, "d7": 3, "d4": 2, "d1": 0}, k=3) == pytest.approx(dcg / idcg)


def test_perfect_ranking_has_ndcg_one():
    assert ndcg_at_k(["a", "b", "c"], {"a", "b"}, k=3) == pytest.approx(1.0)


def test_duplicates_after_first_occurrence_are_ignored():
    assert recall_at_k(["a", "a", "b"], {"a", "b"}, k=2) == 0.5 + 0.5
    assert mrr(["x", "x", "a"], {"a"}) == pytest.approx(1 / 2)


def test_mean_metrics_averages_over_queries():
    out = mean_metrics([["a", "b"], ["c", "d"]], [{"b"}, {"c"}], ks=(1, 2))
    assert out["mrr"] == pytest.approx((0.5 + 1.0) / 2)
    assert out["hit@1"] == 0.5
    assert out["hit@2"] == 1.0


def test_bad_k_and_string_relevant_are_rejected():
    with pytest.raises(ValueError, match="positive integer"):
        hit_rate(["a"], {"a"}, k=0)
    with pytest.raises(ConfigError, match="single string"):
        hit_rate(["a"], "a")
