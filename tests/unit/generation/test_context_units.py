"""context_units: only whole statements and labelled rows are quotable; code, cut sentences and copies go."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document

from rag.generation.context_units import (
    context_units,
    drop_near_duplicates,
    is_code_like,
    units_of_chunk,
)
from rag.generation.extractive import ExtractiveAnswerer

WORDS = st.sampled_from(["rates", "fell", "rose", "sharply", "in", "the", "bank", "market", "today", "while", "prices", "stayed", "flat", "across", "several", "regions", "after", "strong", "demand", "for", "loans"])
SENTENCES = st.lists(WORDS, min_size=4, max_size=12).map(lambda ws: " ".join([ws[0].capitalize(), *ws[1:]]) + ".")
CODE = st.sampled_from([
    'chain.invoke({"question": q}, config={"configurable": {"k": 3}})',
    "0.00}, )",
    "retriever = kb.as_retriever(k=4, filter={'year': 2020})",
    "for doc in docs: print(doc.page_content)",
    "x = rag.chain().invoke(question)  # the answer",
])


@given(st.lists(SENTENCES, min_size=2, max_size=6), st.lists(CODE, min_size=1, max_size=4),
       st.integers(min_value=0, max_value=400), st.sampled_from(["```python", "```", "~~~"]))
@settings(max_examples=60, deadline=None)
def test_code_is_never_a_unit_wherever_the_chunk_is_cut(prose, code, cut, fence):
    close = "~~~" if fence == "~~~" else "```"
    half = len(prose) // 2
    text = "\n\n".join([" ".join(prose[:half]), fence, *code, close, " ".join(prose[half:])])
    chunk = text[min(cut, len(text) - 1):]
    units = units_of_chunk(chunk, metadata={"chunk_index": 1})
    assert all(u.text in prose for u in units), [u.text for u in units]


@given(st.lists(SENTENCES, min_size=2, max_size=8), st.data())
@settings(max_examples=80, deadline=None)
def test_sentences_cut_by_chunk_edges_are_dropped(sentences, data):
    text = " ".join(sentences)
    start = data.draw(st.integers(min_value=0, max_value=len(text) - 1))
    end = data.draw(st.integers(min_value=start + 1, max_value=len(text)))
    units = [u.text for u in units_of_chunk(text[start:end].strip(), metadata={"chunk_index": 3})]
    assert all(u in sentences for u in units)
    offsets = [sum(len(s) + 1 for s in sentences[:i]) for i in range(len(sentences))]
    inside = [s for s, at in zip(sentences, offsets) if start <= at and at + len(s) <= end]
    assert sorted(set(units)) == sorted(set(inside))


def test_a_chunk_starting_mid_sentence_loses_only_that_sentence():
    units = units_of_chunk("rose sharply in the spring. Rates fell in 2020. Prices stayed flat.",
                           metadata={"chunk_index": 2})
    assert [u.text for u in units] == ["Rates fell in 2020.", "Prices stayed flat."]


def test_the_last_sentence_cut_by_the_chunker_is_dropped_but_a_whole_text_keeps_it():
    cut = "Rates fell in 2020. Prices stayed flat across the"
    assert [u.text for u in units_of_chunk(cut, metadata={"chunk_index": 0})] == ["Rates fell in 2020."]
    assert [u.text for u in units_of_chunk("Rates fell in 2020")] == ["Rates fell in 2020"]


@given(st.lists(SENTENCES, min_size=4, max_size=10, unique=True), st.data())
@settings(max_examples=60, deadline=None)
def test_overlapping_chunks_give_each_sentence_once(sentences, data):
    k = data.draw(st.integers(min_value=2, max_value=len(sentences) - 1))
    overlap = data.draw(st.integers(min_value=1, max_value=k - 1))
    docs = [Document(page_content=" ".join(sentences[:k])), Document(page_content=" ".join(sentences[k - overlap:]))]
    texts = [u.text for u in drop_near_duplicates(context_units(docs))]
    assert sorted(texts) == sorted(set(texts))
    assert set(texts) <= set(sentences)


def test_markdown_rows_carry_their_label_and_column_headers():
    table = "| metric | 2022 | 2023 |\n|---|---|---|\n| revenue | 10.5 | 12.3 |\n| costs | 4.1 | 4.4 |"
    rows = [u for u in units_of_chunk(table) if u.kind == "row"]
    assert [r.text for r in rows] == ["revenue (2022: 10.5; 2023: 12.3)", "costs (2022: 4.1; 2023: 4.4)"]


@given(st.lists(st.tuples(st.sampled_from(["Net sales", "Operating income", "Adjusted EBITDA", "Tax expense"]),
                          st.lists(st.integers(min_value=10, max_value=99_999), min_size=2, max_size=4)),
                min_size=1, max_size=5))
@settings(max_examples=40, deadline=None)
def test_pdf_rows_are_rows_quoted_with_the_year_header_above(rows):
    header = "Twelve Months Ended June 30, 2023 2022"
    lines = [header, "($ million)"] + [f"{label} {' '.join(f'{v:,}' for v in values)}" for label, values in rows]
    units = units_of_chunk("\n".join(lines))
    assert [u.kind for u in units] == ["row"] * len(rows)
    assert all(u.text.endswith(f"({header})") and u.text.startswith(label) for u, (label, _) in zip(units, rows))


def test_prose_with_inline_code_is_not_code_but_symbol_soup_is():
    assert not is_code_like("Pass `filter={'year': 2020}` to search only that year.")
    assert is_code_like("0.00}, ) chain.invoke(...)")
    assert is_code_like("Settings: `k`, `fetch_k`, `filter`, `rephrase`, `llm`, `router`.")


def test_a_two_word_field_is_a_unit_but_other_two_word_pieces_are_not():
    assert [u.text for u in units_of_chunk("License: MIT.\n\nSee above.")] == ["License: MIT."]


def test_a_field_line_of_a_reference_entry_is_quoted_with_its_heading():
    entry = ("#### tab_width\n\nNumber of spaces for hard tab expansion.\n\nDefault: 8. Option: --tab-width.\n\n"
             "#### halt_level\n\nThe threshold at or above which system messages halt processing.\n\nDefault: severe (4).")
    texts = [u.text for u in units_of_chunk(entry)]
    assert "tab_width: Default: 8." in texts and "halt_level: Default: severe (4)." in texts
    [tab] = [u for u in units_of_chunk(entry) if u.text == "tab_width: Default: 8."]
    assert "hard tab expansion" in tab.terms   # matched with what the entry says first
    said = ExtractiveAnswerer(embedding=None).invoke(
        {"question": "How many spaces does a hard tab expand to by default?", "context": [entry]})
    assert said == "tab_width: Default: 8. [1]"


def test_headings_and_contents_entries_without_markup_are_not_quoted():
    contents = ("Operating on Other Text Blocks\nCreating and Removing Line Blocks\n\nCommenting a Region of Text\n\n"
                "Converting Documents from Emacs\n\nImenu Support\n\n"
                "git-clean - Remove untracked files from the working tree\n\nThe Emacs mode converts documents.")
    texts = [u.text for u in units_of_chunk(contents)]
    assert "Converting Documents from Emacs" not in texts and "Commenting a Region of Text" not in texts
    assert texts[-2:] == ["git-clean - Remove untracked files from the working tree", "The Emacs mode converts documents."]


def test_an_api_entrys_parameters_and_defaults_say_whose_they_are():
    entry = ("The helpers follow.\n\nwerkzeug.utils.redirect(location, code=302)\n\n"
             "Returns a response object that redirects the client.\n\nParameters:\n\n"
             "location (str) – the location the response should redirect to.\n\n"
             "code (int) – the redirect status code. defaults to 302.\n\nrequests.get(url)\n\nSends a GET request.")
    texts = [u.text for u in units_of_chunk(entry)]
    assert "werkzeug.utils.redirect(location, code=302): Returns a response object that redirects the client." in texts
    assert "werkzeug.utils.redirect(location, code=302): code (int) – the redirect status code. defaults to 302." in texts
    assert "requests.get(): Sends a GET request." in texts   # no defaults: the name alone


REFERENCE = ("## 20.4.1. Memory\n\nwork_mem (integer)\n\nSets the base maximum amount of memory to be used by a query "
             "operation (such as a sort or hash table) before writing to temporary disk files. The default value is "
             "four megabytes (4MB).\n\nNote that a complex query might perform several sort operations at once.\n\n"
             "CONCURRENTLY\n\nBuild the index without taking locks that prevent concurrent writes.\n\nExample\n\n"
             "The server reads this file at start.\n\nmethod\n\nThe name of the index method to be used. The default "
             "method is btree.")


def test_a_reference_entrys_term_labels_its_description():
    """A DocBook variable list, a man page's tagged paragraph: the term on a line of its own, its description below."""
    units = {u.text: u for u in units_of_chunk(REFERENCE)}
    assert "work_mem: Sets the base maximum amount of memory to be used by a query operation (such as a sort or hash " \
           "table) before writing to temporary disk files." in units
    assert "work_mem: The default value is four megabytes (4MB)." in units   # the term's own paragraph: quoted with it
    later = units["Note that a complex query might perform several sort operations at once."]
    assert "work_mem" in later.terms   # a later paragraph of the description: matched with the term, not quoted with it
    assert "CONCURRENTLY: Build the index without taking locks that prevent concurrent writes." in units
    # a label line ("Example") ends the description, a capitalised word is not a term; a lower-case one is (SQL
    # reference pages list their parameters so)
    assert "CONCURRENTLY" not in units["The server reads this file at start."].terms
    assert "method: The name of the index method to be used." in units
    assert units["The default method is btree."].terms == "method"   # it names the term already: not quoted twice


@given(st.from_regex(r"[a-z]{2,8}(_[a-z]{2,8}){1,3}", fullmatch=True), st.sampled_from(["integer", "string", "enum", ""]),
       st.lists(SENTENCES, min_size=2, max_size=8, unique=True), st.data())
@settings(max_examples=60, deadline=None)
def test_an_entry_term_scopes_at_most_its_description(name, kind, sentences, data):
    """Property: every sentence of the term's own paragraph is quoted with the term, and only the next
    `ENTRY_PARAGRAPHS - 1` paragraphs are matched with it; nothing after them is."""
    from rag.generation.entry_terms import ENTRY_PARAGRAPHS

    cuts = sorted(data.draw(st.sets(st.integers(1, len(sentences) - 1), max_size=5)))
    paragraphs = [" ".join(sentences[a:b]) for a, b in zip([0, *cuts], [*cuts, len(sentences)])]
    term = f"{name} ({kind})" if kind else name
    units = units_of_chunk("\n\n".join([term, *paragraphs]))
    where = {s: i for i, p in enumerate(paragraphs) for s in sentences if s in p}
    assert len(units) == len(sentences)
    for unit in units:
        at = where[unit.text.removeprefix(f"{name}: ")]
        assert unit.text.startswith(f"{name}: ") == (at == 0)
        assert (name in unit.terms) == (at < ENTRY_PARAGRAPHS)


def test_a_chunk_continuing_an_entry_keeps_its_term_when_the_chunk_before_it_is_in_the_context():
    meta = {"doc_id": "page", "source": "runtime-config-connection.html"}
    first = Document(page_content="listen_addresses (string)\n\nSpecifies the TCP/IP addresses on which the server "
                                  "is to listen for connections.", metadata={**meta, "chunk_index": 0})
    second = Document(page_content="A warning is emitted for an address which cannot be opened.\n\nThe default value "
                                   "is localhost, which allows only local connections.", metadata={**meta, "chunk_index": 1})
    other = Document(page_content="The default value is 5432.", metadata={"doc_id": "other", "chunk_index": 1})
    for context in ([second, other, first], [first, second, other]):   # the context's order does not matter
        units = {u.text: u for u in context_units(context)}
        assert units["The default value is localhost, which allows only local connections."].terms == "listen_addresses"
        assert units["The default value is 5432."].terms == ""   # another document's chunk continues nothing here
        sources = [u.source for u in context_units(context)]
        assert sources == sorted(sources) and set(sources) == {1, 2, 3}   # units in the context's order
    alone = {u.text: u for u in context_units([second])}   # without the chunk before it, nothing to continue
    assert alone["The default value is localhost, which allows only local connections."].terms == ""


@pytest.mark.parametrize(("term", "label"), [
    ("jinja-filters.filesizeformat(value: Union[str, float, int], binary: bool = False) → str",
     "jinja-filters.filesizeformat(value: Union[str, float, int], binary: bool = False)"),
    ("ensure_object(object_type: Type[V]) → V", "ensure_object()"),
    ("click.echo(message=None, nl=True) -> None", "click.echo(message=None, nl=True)"),
])
def test_a_typed_signature_labels_its_description(term, label):
    # Sphinx prints a typed signature with its return type after an arrow, and a custom domain's objects under
    # a namespace with a hyphen ("jinja-filters."): the description under it is still the entry's
    chunk = f"{term}\n\nFormat the value like a human-readable file size. It may be given in bytes."
    units = units_of_chunk(chunk)
    assert [u.text for u in units] == [f"{label}: Format the value like a human-readable file size.",
                                       f"{label}: It may be given in bytes."]
    assert [u.lead for u in units] == [True, False]   # the first sentence says what the entry is


_DIRECTIVE_HTML = """<html><body><h2>KeepAliveTimeout Directive</h2>
<table class="directive">
<tr><th>Description:</th><td>Amount of time the server will wait for subsequent requests on a persistent connection</td></tr>
<tr><th>Syntax:</th><td><code>KeepAliveTimeout <var>num</var>[ms]</code></td></tr>
<tr><th>Default:</th><td><code>KeepAliveTimeout 5</code></td></tr>
<tr><th>Context:</th><td>server config, virtual host</td></tr>
<tr><th>Module:</th><td>core</td></tr>
</table>
<p>The number of seconds the server will wait for a subsequent request before closing the connection.</p>
<h2>Timeout Directive</h2>
<table><tr><th>Default:</th><td><code>Timeout 60</code></td></tr><tr><th>Module:</th><td>core</td></tr></table>
<p>Jump to:</p><table><tr><th>Jump to:</th><td>. : [ A B C D E</td></tr></table>
<h2>Image</h2><table><tr><th>Directive Type:</th><td>"image"</td></tr></table><p>An "image" is a simple picture.</p>
</body></html>"""


def test_a_key_value_tables_rows_are_field_lines_of_the_entry_they_are_under():
    from rag.indexing.html_text import html_to_text

    text = html_to_text(_DIRECTIVE_HTML)[0]
    assert "Default: | KeepAliveTimeout 5" in text   # how the HTML reader prints the table (the premise)
    texts = [u.text for u in units_of_chunk(text)]
    assert "KeepAliveTimeout Directive: Default: KeepAliveTimeout 5" in texts
    assert "KeepAliveTimeout Directive: Context: server config, virtual host" in texts
    assert "Timeout Directive: Default: Timeout 60" in texts   # the next entry's field, under its own heading
    assert not [t for t in texts if "Jump to" in t]   # a navigation row of letters states nothing
    assert not [t for t in texts if "Directive Type" in t]   # nor a field naming only the entry it is under
    answer = ExtractiveAnswerer(embedding=None)
    for question, said in [("What is the default value of KeepAliveTimeout?", "Default: KeepAliveTimeout 5"),
                           ("In which contexts is the KeepAliveTimeout directive allowed?", "Context: server config"),
                           ("What is the default Timeout?", "Default: Timeout 60")]:
        assert said in answer.invoke({"question": question, "context": [text]}), question


@given(st.sampled_from(["Default:", "Context:", "Return type:", "Module:", "Status:"]),
       st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=40),
       st.sampled_from(["", "## Some Entry\n\n", "## Very Long Heading Of A Section About Many Things Here\n\n"]))
def test_a_field_row_quotes_its_value_verbatim_or_not_at_all(label, value, heading):
    text = f"{heading}{label} | {value}\n\nThe entry is described here in a sentence."
    for unit in units_of_chunk(text):
        assert unit.text.endswith("The entry is described here in a sentence.") or " ".join(value.split()) in unit.text
