"""Token usage from usage_metadata and cost from the extendable price table."""

from __future__ import annotations

import pytest
from langchain_core.language_models import FakeListChatModel

from rag.models.pricing import PRICES, cost, price_of, register_price
from rag.models.usage import UsageTracker, add_usage


def test_tracker_sums_usage_of_invoke_and_stream(fake_llm_cls):
    llm = fake_llm_cls(responses=["one two three", "four five"])
    tracker = UsageTracker()
    llm.invoke("a b", config={"callbacks": [tracker]})
    "".join(c.content for c in llm.stream("c d e", config={"callbacks": [tracker]}))
    summary = tracker.summary()
    assert (summary["input_tokens"], summary["output_tokens"], summary["calls"]) == (5, 5, 2)
    assert summary["models"] == ["fake-usage-model"]


def test_cost_uses_the_registered_price(fake_llm_cls):
    register_price("fake-usage-model-priced", input_per_million=2.0, output_per_million=8.0)
    llm = fake_llm_cls(responses=["one two three four"], model_name="fake-usage-model-priced")
    tracker = UsageTracker()
    llm.invoke("w " * 10, config={"callbacks": [tracker]})
    assert tracker.summary()["cost"] == pytest.approx((10 * 2.0 + 4 * 8.0) / 1e6)


def test_unknown_model_has_unknown_cost_not_zero(fake_llm_cls):
    tracker = UsageTracker()
    fake_llm_cls(responses=["x"], model_name="nobody-prices-this").invoke("q", config={"callbacks": [tracker]})
    assert tracker.summary()["cost"] is None


def test_model_without_usage_metadata_counts_a_call_with_zero_tokens():
    tracker = UsageTracker()
    FakeListChatModel(responses=["hi there"]).invoke("q", config={"callbacks": [tracker]})
    assert tracker.summary()["calls"] == 1 and tracker.summary()["total_tokens"] == 0


def test_dated_model_names_match_by_prefix():
    assert price_of("gpt-4o-mini-2024-07-18") == PRICES["gpt-4o-mini"]
    assert cost("gpt-4o-mini", input_tokens=1_000_000, output_tokens=0) == pytest.approx(0.15)


def test_negative_price_is_rejected():
    with pytest.raises(ValueError, match=">= 0"):
        register_price("m", input_per_million=-1, output_per_million=0)


def test_add_usage_keeps_unknown_cost_unknown():
    a = {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2, "calls": 1, "cost": 0.5, "models": ["a"]}
    b = {**a, "cost": None, "models": ["b"]}
    assert add_usage(a, b)["cost"] is None and add_usage(a, a)["cost"] == 1.0
    assert add_usage(a, b)["models"] == ["a", "b"]
