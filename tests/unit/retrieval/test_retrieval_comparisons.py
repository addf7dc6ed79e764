"""The comparison parser of the opt-in side searches (`RetrievalSettings(side_searches=True)`)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rag.compose.retrieval_settings import RetrievalSettings
from rag.retrieval.comparisons import comparison_sides, side_question


def test_side_searches_are_off_by_default_and_a_setting():
    assert RetrievalSettings().side_searches is False
    assert RetrievalSettings(side_searches=True).side_searches is True


def test_each_side_is_worded_as_its_own_question():
    question = "What is the difference between the -q and the -Q options?"
    sides = comparison_sides(question)
    assert (sides.first, sides.second) == ("-q", "-Q")
    assert "-Q" in side_question(question, sides, 1) and "-q" not in side_question(question, sides, 1)
    assert comparison_sides("Which command compares two files?") is None
    assert comparison_sides("How did sales in Q2 2023 compare to Q2 2022?") is None   # one thing in two periods


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=200))
def test_any_text_parses_without_error(text):
    sides = comparison_sides(text)
    if sides is not None:
        assert sides.first_keys and sides.second_keys
        assert isinstance(side_question(text, sides, 0), str)
