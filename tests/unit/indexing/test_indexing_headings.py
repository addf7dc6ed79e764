"""Section headings of plain-text (PDF) pages: detection, running headers, carry-forward, chunk sections."""

from __future__ import annotations

import pytest

from rag.indexing.headings import (
    chunk_section,
    heading_spans,
    is_heading_line,
    running_headers,
    section_at,
)


@pytest.mark.parametrize("line", [
    "Consolidated Statements of Cash Flows",
    "LIQUIDITY AND CAPITAL RESOURCES",
    "Item 7. Management's Discussion and Analysis of Financial Condition.",
    "Note 3 — Restructuring and Impairment Charges",
    "Risks Related to Our Business",
])
def test_headings_are_recognised(line):
    assert is_heading_line(line)


@pytest.mark.parametrize("line", [
    "Net sales were $34.2 billion in 2022, down 3.2% from the prior year.",   # a sentence
    "Net Income Attributable to PepsiCo $ 8,910 $ 7,618 $ 7,120",            # a table row
    "the reputation, culture or image of any of our brands is tarnished",     # lower case prose
    "Table of Contents",                                                       # page furniture
    "2022 2021 2020",                                                          # column years
    "",
])
def test_sentences_table_rows_and_furniture_are_not_headings(line):
    assert not is_heading_line(line)


def test_running_headers_are_lines_atop_many_pages():
    pages = [f"ACME CORP\nPage body {i} continues here." for i in range(10)] + ["Other Top\nbody"]
    assert "ACME CORP" in running_headers(pages)
    assert "Other Top" not in running_headers(pages)


def test_running_header_is_never_a_section():
    pages = [f"ACME CORP\nResults of Operations\nSales grew {i}%." if i == 0 else f"ACME CORP\nsales text {i}."
             for i in range(8)]
    spans = heading_spans(pages)
    assert section_at(spans, 5, 0) == "Results of Operations"


def test_the_last_heading_carries_over_to_a_page_that_starts_mid_paragraph():
    pages = ["Liquidity and Capital Resources\nCash was $3.6 billion at year end.",
             "and debt was $14 billion, as described below.\nMarket Risk\nRates rose."]
    spans = heading_spans(pages)
    assert spans[1][0] == (-1, "Liquidity and Capital Resources")
    assert section_at(spans, 1, 0) == "Liquidity and Capital Resources"
    assert section_at(spans, 1, len(pages[1]) - 1) == "Market Risk"


def test_a_heading_and_its_sub_heading_are_joined_but_a_third_line_starts_anew():
    spans = heading_spans(["ITEM 8. FINANCIAL STATEMENTS\nINCOME STATEMENTS\nBalance Sheets\nrows 1 2 3"])
    assert [h for _, h in spans[0]] == ["ITEM 8. FINANCIAL STATEMENTS / INCOME STATEMENTS", "Balance Sheets"]


def test_a_chunk_opening_with_a_statement_title_is_filed_under_it_not_under_the_carried_heading():
    page = ("Table of Contents\nConsolidated Balance Sheet\n(Dollars in millions) 2022 2021\nAssets\n"
            + "Cash and cash equivalents $ 3,655 $ 4,564\n" * 20)
    pages = ["Report of Independent Auditors\nWe have audited the statements.", page]
    spans = heading_spans(pages + ["filler"] * 10)
    assert chunk_section(spans, 1, 0, 600) == "Consolidated Balance Sheet"
    # further down the page, no heading opens the chunk: the one in effect names it
    assert chunk_section(spans, 1, 400, 900) == "Assets"
