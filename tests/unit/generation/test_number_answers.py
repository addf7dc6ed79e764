"""Number answers from tables: the period asked, the total row, the extreme row of a superlative, the asking part.

The tables are printed as the PDF loader prints them (cells joined with " | ", header lines above), in the
shapes of real filings' statements.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document

from rag.generation.context_units import units_of_chunk
from rag.generation.extractive import ExtractiveAnswerer
from rag.generation.periods import asked_kind, period_cells
from rag.generation.row_choice import cell_value, superlative
from rag.generation.table_rows import header_cells
from rag.generation.value_units import asked_part, in_period, value_key

OPERATING_RESULTS = ("Summary Operating Results\nThe following table summarizes our consolidated operating results:\n"
                     "Three Months Ended Six Months Ended\nJune 30, June 30,\n2023 2022 2023 2022\n(In thousands)\n"
                     "Net revenues | $3,942,207 | $3,264,888 | $7,815,503 | $6,119,197\n"
                     "Operating income | 371,378 | 2,381,451 | 1,102,217 | 2,487,239\n"
                     "Net income | 243,544 | 1,622,625 | 723,427 | 1,587,832")


def answer(question: str, *chunks: str, source: str = "", min_confidence: float = 0.45) -> str:
    docs = [Document(page_content=c, metadata={"source": source, "title": source.rsplit(".", 1)[0]} if source else {})
            for c in chunks]
    answerer = ExtractiveAnswerer(embedding=None, min_confidence=min_confidence)
    return answerer.invoke({"question": question, "context": docs})


def test_a_line_of_periods_names_the_columns_under_it():
    [revenues, *_] = units_of_chunk(OPERATING_RESULTS)
    assert revenues.text == ("Net revenues (Three Months Ended 2023: $3,942,207; Three Months Ended 2022: $3,264,888; "
                             "Six Months Ended 2023: $7,815,503; Six Months Ended 2022: $6,119,197)")
    assert header_cells("(Unaudited; Dollars in Millions) SECOND QUARTER SIX MONTHS") == ["SECOND QUARTER", "SIX MONTHS"]
    assert header_cells("The quarter ended well.") == []   # a sentence is not a header


def test_a_quarter_question_reads_the_three_month_column():
    said = answer("What were the net revenues for the three months ended June 30, 2023?", OPERATING_RESULTS)
    assert said == "Net revenues (Three Months Ended 2023: $3,942,207) [1]"
    said = answer("What were the net revenues for the six months ended June 30, 2022?", OPERATING_RESULTS)
    assert said == "Net revenues (Six Months Ended 2022: $6,119,197) [1]"


def test_a_quarter_question_prefers_the_table_under_a_quarter_line():
    six = ("Condensed Consolidated Statement of Earnings\n(in Millions) SIX MONTHS\n2023 2022 Percent\n"
           "Net earnings | $5,076 | $9,963 | (49.1)")
    quarter = ("Condensed Consolidated Statement of Earnings\n(in Millions) SECOND QUARTER\n2023 2022 Percent\n"
               "Net earnings | $5,144 | $4,814 | 6.9")
    said = answer("What were net earnings in the second quarter of 2023?", six, quarter)
    assert said.startswith("Net earnings (2023: $5,144) [2]")   # the quarter's first


STORES = ("Fiscal 2024 | Fiscal 2023\nTotal Stores at Beginning of Second Quarter | Stores Opened | Stores Closed | "
          "Total Stores at End of Second Quarter | Total Stores at Beginning of Second Quarter | Stores Opened | "
          "Stores Closed | Total Stores at End of Second Quarter\n"
          "Acme Corp | 908 | - | (1) | 907 | 931 | 1 | (2) | 930\nOutlet Centers | 20 | 1 | (1) | 20 | 16 | 2 | - | 18\n"
          "Yardbird | 18 | 4 | - | 22 | 9 | 4 | - | 13\nTotal | 966 | 5 | (2) | 969 | 977 | 7 | (2) | 982")


def test_the_total_row_answers_for_the_whole_company_whose_name_labels_another_row():
    said = answer("How many Acme Corp stores were there at the end of Q2 of FY2024?", STORES,
                  source="/filings/ACMECORP_2024Q2_10Q.pdf")
    assert said.startswith("Total (") and "969" in said


def test_a_row_the_question_names_beats_the_total():
    said = answer("How many Outlet Centers stores were there at the end of Q2 of FY2024?", STORES,
                  source="/filings/ACMECORP_2024Q2_10Q.pdf")
    assert said.startswith("Outlet Centers (")


# the same table as a PDF reader prints it: its header lines too long to read as columns, kept by the chunker as the
# table chunk's section; and a table about something else whose row label says "number"
STORES_PDF = ("Fiscal 2024 Fiscal 2023\nTotal Stores at Total Stores at Total Stores at Total Stores at\n"
              "Beginning of Stores Stores End of Second Beginning of Stores Stores End of Second\n"
              "Second Quarter Opened Closed Quarter Second Quarter Opened Closed Quarter\n"
              "Acme Corp | 908 | - | (1) | 907 | 931 | 1 | (2) | 930\nOutlet Centers | 20 | 1 | (1) | 20 | 16 | 2 | - | 18\n"
              "Total | 966 | 5 | (2) | 969 | 977 | 7 | (2) | 982")
STORES_SECTION = ("Total Stores at Total Stores at Total Stores at Total Stores at / Beginning of Stores Stores End of "
                  "Second Beginning of Stores Stores End of Second / Second Quarter Opened Closed Quarter Second Quarter "
                  "Opened Closed Quarter")
REPURCHASES = ("Information regarding share repurchases was as follows:\nThree Months Ended Six Months Ended\n"
               "July 29, 2023 July 30, 2022 July 29, 2023 July 30, 2022\nTotal cost of shares repurchased | $69 | $10 | $150 | $452\n"
               "Total number of shares repurchased | 0.9 | 0.1 | 2.0 | 4.6")


def test_a_table_chunks_header_lines_name_what_its_rows_count():
    table = {"source": "/filings/ACMECORP_2024Q2_10Q.pdf", "title": "ACMECORP_2024Q2_10Q", "chunk_type": "table"}
    docs = [Document(page_content=REPURCHASES, metadata={**table, "section": "Three Months Ended Six Months Ended"}),
            Document(page_content=STORES_PDF, metadata={**table, "section": STORES_SECTION})]
    said = ExtractiveAnswerer(embedding=None).invoke(
        {"question": "Was there any change in the number of Acme Corp stores between Q2 of FY2024 and FY2023?",
         "context": docs})
    assert said.startswith("Total (") and "982" in said   # not the shares row that says "number"
    # without the section (a chunk that is not a table) the row has no caption: nothing says what it counts
    [_, _, total] = units_of_chunk(STORES_PDF, 1, {**table, "section": STORES_SECTION})
    assert "Stores" in total.terms
    assert "Stores" not in units_of_chunk(STORES_PDF, 1, {"section": STORES_SECTION})[2].terms


def test_a_rows_own_caption_line_comes_before_the_table_chunks_section():
    text = ("(Dollars in millions) 2023 2022\nREVENUES\nNorth America | $21,608 | $18,353\n"
            "DEPRECIATION\nNorth America | $128 | $124")
    revenue, depreciation = units_of_chunk(text, 1, {"chunk_type": "table", "section": "REVENUES"})
    assert "REVENUES" in revenue.terms and "DEPRECIATION" in depreciation.terms
    assert "REVENUES" not in depreciation.terms   # a later block of a long table is not about its first caption


def test_a_line_comparing_two_years_does_not_name_the_columns_by_year():
    growth = ("Adjusted Operational Sales Growth\nTWELVE MONTHS 2022 ACTUAL vs. 2021 ACTUAL\n"
              "Consumer Health Pharmaceutical MedTech Total\nU.S. | 1.3% | 2.3% | 5.4% | 3.0%")
    [row] = units_of_chunk(growth)
    assert row.text == "U.S. | 1.3% | 2.3% | 5.4% | 3.0% (TWELVE MONTHS 2022 ACTUAL vs. 2021 ACTUAL)"   # not "2021: 5.4%, 3.0%"
    [row] = units_of_chunk("Year ended December 31, % change\n2022 2021 22 vs. 21\nEffective tax rate | 23% | 20%")
    assert row.text.startswith("Effective tax rate (2022: 23%; 2021: 20%")   # years, then their change: still columns
    assert header_cells("2017 2016 2015 2017 vs. 2016 2016 vs. 2015") == []


SEGMENTS = ("YEAR ENDED MAY 31,\n(Dollars in millions) 2023 2022 2021\nREVENUES\n"
            "North America | $21,608 | $18,353 | $17,179\nEurope, Middle East & Africa | 13,418 | 12,479 | 11,456\n"
            "Greater China | 7,248 | 7,547 | 8,290\nAsia Pacific & Latin America | 6,431 | 5,955 | 5,343\n"
            "Total Brand | 48,763 | 44,436 | 42,293")


def test_a_superlative_is_answered_by_the_extreme_row_in_the_year_asked():
    # the selection, not the refusal: without an embedding the confidence is the key terms' share only
    assert answer("Which geographic segment had the highest revenues in fiscal 2023?", SEGMENTS, min_confidence=0) == \
        "North America (2023: $21,608) [1]"   # not the total row
    assert answer("Which geographic segment had the lowest revenues in fiscal 2021?", SEGMENTS, min_confidence=0) == \
        "Asia Pacific & Latin America (2021: 5,343) [1]"


def test_the_asking_sentence_without_instructions_or_asides_gives_the_key_terms():
    question = ("What is the amount of restructuring costs (formerly called productivity charges) in the income "
                "statement for FY2022? If restructuring costs are not explicitly outlined then state 0.")
    assert asked_part(question) == "What is the amount of restructuring costs in the income statement for FY2022?"
    assert value_key(["highest", "revenu", "2023", "q2", "month", "end"]) == ["revenu"]
    assert value_key(["q2", "2023"]) == ["q2", "2023"]   # nothing else left: keep them
    assert asked_kind("Did net earnings increase in Q2 of FY2023?") == "quarter"
    assert superlative("Which segment had the largest sales?") == 1 and superlative("Was the largest up?") == 0


TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=120)


@given(TEXT, st.sets(st.sampled_from(["2021", "2022", "2023"])), st.sampled_from(["", "quarter", "half", "year"]))
@settings(max_examples=200, deadline=None)
def test_untrusted_text_never_breaks_the_readers_and_in_period_only_drops_columns(text, years, kind):
    period_cells(text)
    header_cells(text)
    value = cell_value(text)
    assert value is None or isinstance(value, float)
    kept = in_period(text, years, kind)
    assert kept == text or (kept.startswith(text.split(" (", 1)[0]) and len(kept) < len(text))


@given(st.lists(st.integers(min_value=-9_999, max_value=99_999), min_size=3, max_size=6, unique=True),
       st.sampled_from([1, -1]))
@settings(max_examples=40, deadline=None)
def test_the_superlative_row_is_the_extreme_value_whatever_the_order(values, direction):
    names = ["Alpha", "Bravo", "Charlie", "Delta", "Echo", "Foxtrot"]
    cells = [f"({-v:,})" if v < 0 else f"{v:,}" for v in values]
    table = "(in millions) 2023 2022\nREVENUES\n" + "\n".join(
        f"{n} | {c} | 1" for n, c in zip(names, cells))
    word = "highest" if direction == 1 else "lowest"
    said = answer(f"Which segment had the {word} revenues in 2023?", table, min_confidence=0)
    extreme = max(range(len(values)), key=lambda i: direction * values[i])
    assert said.startswith(f"{names[extreme]} (2023: {cells[extreme]})")


# Column naming audited on the development filings (bench/table_audit.py): where the header lines do not name a
# row's columns reliably, the row is quoted raw with its header line rather than with invented names.

def _quote(chunk: str) -> str:
    return units_of_chunk(chunk)[-1].text


def test_a_line_of_figures_is_not_a_header():
    # a row whose label the reader put on the line above: its numbers named the next row's columns
    chunk = "Market Acquisitions Total\n230 | 57 | 2,335\nProperty and equipment | 4 | 3 | 3,794"
    assert _quote(chunk).startswith("Property and equipment | 4 | 3 | 3,794")
    chunk = "2020 2019 2018\n1 year | 60 | 69\nEquity | 661 | 361 | 83"   # a row with a number in its label
    assert _quote(chunk) == "Equity (2020: 661; 2019: 361; 2018: 83)"


def test_a_row_whose_label_is_a_figure_is_quoted_raw():
    chunk = "For the Years Ended December 31,\n2019 2018\n$5,863 | $4,380 | $1,483"
    assert _quote(chunk) == "$5,863 | $4,380 | $1,483 (2019 2018)"   # not "$5,863 (2019: $4,380; 2018: $1,483)"


def test_a_header_with_a_year_more_than_the_row_does_not_name_it():
    chunk = "Fiscal Year\nIn Millions 2022 2021 2020\nTotal | $21,378.4 | $21,213.0"
    assert _quote(chunk) == "Total | $21,378.4 | $21,213.0 (In Millions 2022 2021 2020)"   # not "2021: ...; 2020: ..."
    chunk = "Balance Sheet Location | January 28, 2023 | January 29, 2022\nOperating lease assets | $2,746 | $2,654"
    assert _quote(chunk) == "Operating lease assets (January 28, 2023: $2,746; January 29, 2022: $2,654)"


def test_years_followed_by_change_columns_do_not_span_them():
    chunk = ("Year ended December 31, $ change % change\n2022 2021 22 vs. 21 22 vs. 21\n"
             "Display Technologies | 3,306 | 3,700 | (394) | (11)%")
    assert _quote(chunk).startswith("Display Technologies | 3,306 | 3,700 | (394) | (11)%")   # not "2021: (394), (11)%"
    chunk = "Per Share Data 2022 2021 Change\nDiluted EPS | $4.42 | $3.78"
    assert _quote(chunk) == "Diluted EPS (2022: $4.42; 2021: $3.78)"   # as many cells as years: still named
    chunk = "(in millions) 2021 2020 Change\nTrading liabilities | 191,349 | 170,181 | 12"
    assert _quote(chunk) == "Trading liabilities (2021: 191,349; 2020: 170,181; Change: 12)"   # one more: the change


@given(st.lists(st.sampled_from(["2021", "2022", "2023"]), min_size=2, max_size=6),
       st.sampled_from(["", " Change", " % change", " 22 vs. 21"]),
       st.lists(st.sampled_from(["$28", "(15)", "3.4%", "1,024", "—"]), min_size=1, max_size=7))
@settings(max_examples=200, deadline=None)
def test_a_column_name_never_stands_for_cells_apart_nor_a_year_for_a_change(years, trailing, cells):
    """A class of year header lines over rows of any width: a named quote has each name once (its cells side by
    side), and a line of years with a change column after them names no more cells than its years and the change."""
    cells = ["1,024", *cells]
    text = _quote(f"(in millions) {' '.join(years)}{trailing}\nTotal | {' | '.join(cells)}")
    if text.startswith("Total | "):
        return   # quoted raw
    names = [group.rpartition(": ")[0] for group in text[len("Total ("):-1].split("; ")]
    assert len(names) == len(set(names))
    assert not trailing or len(cells) - len(years) in (0, 1)   # the years, then at most the one change column


def test_terms_and_comparisons_are_not_periods():
    assert period_cells("Total Less than 1 year 1 to 3 years 3 to 5 years thereafter") == []
    assert header_cells("Net Revenue Year over Year % Change") == []
    assert header_cells("(in millions, except ratios) less years years Total grade grade Total of IG") == []


def test_a_year_over_two_columns_is_told_apart_by_the_dates():
    chunk = ("($ in millions) December 31, 2022 June 30, 2022\nCash and cash equivalents | $837 | $775")
    assert _quote(chunk) == "Cash and cash equivalents (December 31, 2022: $837; June 30, 2022: $775)"   # not "2022: $837, $775"
    chunk = "March 31, 2021 December 31, 2020 March 31, 2020\n(in millions) Avg. Min Avg. Min Avg. Min\nVaR | 1 | 2 | 3 | 4 | 5 | 6"
    assert _quote(chunk) == "VaR (March 31, 2021: 1, 2; December 31, 2020: 3, 4; March 31, 2020: 5, 6)"
    chunk = "(in millions) 2022 Purchases Sales level 3 2022 at June 30, 2022\nLoans | 1,933 | 16 | 394 | (100) | (531) | 616"
    assert _quote(chunk).startswith("Loans | 1,933 | 16 |")   # one year over every column tells them apart from nothing
    chunk = "2020 2020 2019 2019\nCost of revenue | $97 | $100 | $67 | $38"   # a year's quarters side by side
    assert _quote(chunk) == "Cost of revenue (2020: $97, $100; 2019: $67, $38)"


def test_footnote_marks_dashes_and_prose_in_cells_are_not_column_names():
    chunk = "Three months ended June 30, Six months ended June 30,\n(f) | (f)\nNet income | $5,306 | $10,549"
    assert _quote(chunk) == "Net income (Three months ended June 30: $5,306; Six months ended June 30: $10,549)"
    chunk = "Options to repurchase delinquent loans | (b)\nMortgage loans | 55 | 64"
    assert _quote(chunk) == "Mortgage loans | 55 | 64"
    chunk = "(in millions) | were not material to the Firm for the three months.\nNonaccrual loans | $110 | $119"
    assert _quote(chunk).startswith("Nonaccrual loans | $110 | $119")


def test_a_word_under_a_year_is_a_second_label_column_not_the_years_figure():
    chunk = "Contract Type Statement of Earnings Location 2023 2022 2021\nFinance leases | Long-term debt | 26 | 27"
    assert _quote(chunk).startswith("Finance leases | Long-term debt | 26 | 27")   # not "2023: Long-term debt; 2022: 26"
    chunk = "2022 2021\nExpected life | 7 | years | 6 | years"   # a unit the reader split off its number
    assert _quote(chunk) == "Expected life (2022: 7, years; 2021: 6, years)"
    chunk = "Type | Rate | Maturity | Amount\nOther subsidiaries | fixed rate | 0.04% | 2022-2047 | 18"
    assert _quote(chunk) == "Other subsidiaries (Type: fixed rate; Rate: 0.04%; Maturity: 2022-2047; Amount: 18)"


def test_a_raw_row_is_not_bracketed_with_a_row_of_figures():
    chunk = "Restructuring\n2020 restructuring charges | 158 | 289\nCash payments | (138) | (255)"
    assert _quote(chunk) == "Cash payments | (138) | (255)"   # not "(2020 restructuring charges | 158 | 289)"


def test_a_date_split_into_cells_is_not_a_header_but_still_brackets_a_raw_row():
    chunk = "Year Ended June | 30, | 2023\n($ in millions) | Flexibles | Packaging | Total\nNet sales | $11,154 | $3,540 | $14,694"
    assert _quote(chunk) == "Net sales (Flexibles: $11,154; Packaging: $3,540; Total: $14,694)"   # not "30, Packaging"
    chunk = "Year ended December | 31, | 2020\nTotal special items | 205 | — | 19 | (0.07)"
    assert _quote(chunk) == "Total special items | 205 | — | 19 | (0.07) (Year ended December | 31, | 2020)"


def test_a_year_spans_cells_only_of_the_same_shape():
    chunk = "2020 2019\nExpected volatility | 32.9% | 29.5 | - | 29.9%"   # the years' percents are not side by side
    assert _quote(chunk) == "Expected volatility | 32.9% | 29.5 | - | 29.9% (2020 2019)"
    chunk = "2022 2021\nSame period last year | 20.8% | $10.12 | 22.3% | $9.36"   # a share and a figure per year
    assert _quote(chunk) == "Same period last year (2022: 20.8%, $10.12; 2021: 22.3%, $9.36)"


def test_a_numbered_quarter_names_its_own_column():
    assert period_cells("1ST QUARTER 2ND QUARTER 3RD QUARTER 4TH QUARTER") == \
        ["1ST QUARTER", "2ND QUARTER", "3RD QUARTER", "4TH QUARTER"]   # not "QUARTER 2ND" over the first quarter
