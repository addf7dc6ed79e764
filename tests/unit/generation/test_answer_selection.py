"""Which unit answers: table rows printed as "label | cell", the metric and year asked, denials, definitions, code."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document

from rag.generation.context_units import units_of_chunk
from rag.generation.extractive import ExtractiveAnswerer
from rag.generation.support import SupportScorer

LABELS = st.sampled_from(["Net sales", "Cost of sales", "Total restructuring charges", "Effective tax rate",
                          "Adjusted EBITDA", "Operating income"])
CELLS = st.integers(min_value=-99_999, max_value=99_999).map(lambda v: f"({abs(v):,})" if v < 0 else f"${v:,}")


@given(st.lists(st.tuples(LABELS, st.lists(CELLS, min_size=3, max_size=3)), min_size=1, max_size=6,
                unique_by=lambda r: r[0]))
@settings(max_examples=40, deadline=None)
def test_pipe_rows_under_a_year_line_are_rows_naming_each_cell_by_its_year(rows):
    lines = ["A summary of our charges is as follows:", "2022 2021 2020"] + [
        " | ".join([label, *cells]) for label, cells in rows]
    units = units_of_chunk("\n".join(lines))
    assert [u.text for u in units] == [
        f"{label} (2022: {cells[0]}; 2021: {cells[1]}; 2020: {cells[2]})" for label, cells in rows]
    assert all(u.kind == "row" for u in units)


def test_a_spanning_header_names_its_columns_and_split_cells_are_joined():
    table = ("Fiscal 2024 | Fiscal 2023\nOpened | Closed | Opened | Closed\n"
             "Outlet Centers | 1 | (1) | 2 | -\nEffective rate | 23 | % | 20 | %")
    assert [u.text for u in units_of_chunk(table)] == [
        "Outlet Centers (Fiscal 2024 Opened: 1; Fiscal 2024 Closed: (1); Fiscal 2023 Opened: 2; Fiscal 2023 Closed: -)",
        "Effective rate (Fiscal 2024: 23%; Fiscal 2023: 20%)"]   # two cells: the header of two spans them


def test_a_value_question_is_answered_by_the_row_naming_its_metric_read_in_the_year_asked():
    context = [Document(page_content="Adjusted EBITDA is a non-GAAP measure that management uses to assess results "
                                     "and it excludes several items."),
               Document(page_content="Acme ($ million) 2022 2023\nNet sales | 14,544 | 14,694\n"
                                     "Adjusted EBITDA | 2,117 | 2,018\nTax expense | 300 | 193")]
    answer = ExtractiveAnswerer(embedding=None).invoke({"question": "What was Acme's adjusted EBITDA in FY2023?",
                                                        "context": context})
    assert answer == "Adjusted EBITDA (2023: 2,018) [2]"   # the year asked: one value, not the whole row


def test_a_unit_denying_what_is_asked_does_not_answer_it():
    context = [Document(page_content="--soft\n\nDoes not reset the index file or the working tree, discarding "
                                     "no changes.\n\n--hard\n\nResets the index and working tree. Any changes "
                                     "to tracked files are discarded.")]
    answer = ExtractiveAnswerer(embedding=None).invoke({
        "question": "Which mode resets the index and the working tree, discarding changes?", "context": context})
    assert answer.startswith("--hard: Resets the index and working tree.")


def test_a_definition_answers_how_a_term_is_defined():
    context = [Document(page_content="The precision is part of the model id: fp32 keeps full weights."),
               Document(page_content="- **citation precision** = correct citations / all citations;\n"
                                     "- **citation recall** = supported claims / all claims.")]
    answer = ExtractiveAnswerer(embedding=None).invoke({"question": "How is citation precision defined?",
                                                        "context": context})
    assert "correct citations / all citations" in answer and answer.endswith("[2]")


def test_an_intro_is_quoted_with_its_code_and_counts_as_quoted():
    chunk = ("Costs come from a price table; add your models:\n\n```python\nfrom acme.pricing import register_price\n\n"
             "register_price(\"my-model\", 0.5)\n```\n")
    [unit] = units_of_chunk(chunk)
    assert unit.text == ('Costs come from a price table; add your models: `from acme.pricing import register_price` '
                         '`register_price("my-model", 0.5)`')
    scorer = SupportScorer([chunk], embedding=None)
    assert scorer.quoted(unit.text) and not scorer.quoted(unit.text.replace("0.5", "9.9"))


def test_a_reference_entry_answers_with_its_name_and_its_default():
    """A DocBook variable list (PostgreSQL's configuration reference): the description does not name its setting,
    the term line above it does; the answer says whose description and whose default it quotes."""
    entries = ("20.4.1. Memory\n\nshared_buffers (integer)\n\nSets the amount of memory the database server uses "
               "for shared memory buffers. The default is typically 128 megabytes (128MB).\n\nwork_mem (integer)\n\n"
               "Sets the base maximum amount of memory to be used by a query operation (such as a sort or hash "
               "table) before writing to temporary disk files. The default value is four megabytes (4MB).")
    answerer = ExtractiveAnswerer(embedding="default")
    which = answerer.invoke({"question": "Which parameter limits the memory a sort may use before writing to "
                                         "temporary disk files?", "context": [Document(page_content=entries)]})
    assert which.startswith("work_mem: Sets the base maximum amount of memory")
    default = answerer.invoke({"question": "What is the default work_mem?", "context": [Document(page_content=entries)]})
    assert default.startswith("work_mem: The default value is four megabytes (4MB).")


def test_a_number_question_takes_the_best_unit_stating_a_number_near_the_best():
    """The unit sharing most words with "How many ...?" states no number; the one just below it does: it answers
    (before, the answerer refused: "no unit states a number")."""
    chunk = ("Determines the number of connection slots that are reserved for connections by PostgreSQL superusers. "
             "At most max_connections connections can ever be active simultaneously. The default value is three "
             "connections.")
    answerer = ExtractiveAnswerer(embedding="default")
    question = "How many connection slots are reserved for superusers by default?"
    assert not answerer.rank(question, [chunk])[0].text.startswith("The default value")   # the premise
    assert answerer.invoke({"question": question, "context": [chunk]}) == "The default value is three connections. [1]"
    far = chunk.replace("The default value is three connections.", "Three is a number that servers like.")
    assert answerer.invoke({"question": question, "context": [far]}).startswith("I don't know")   # not near the best
