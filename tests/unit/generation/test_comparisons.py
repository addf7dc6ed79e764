"""Comparison questions are answered from both sides: one cited unit about each, or the side the context lacks."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document

from rag.generation.comparisons import comparison_sides, side_question
from rag.generation.context_units import units_of_chunk
from rag.generation.extractive import NO_ANSWER, ExtractiveAnswerer
from rag.generation.sentences import parse_answer

# the diffutils manual's option entries, as the HTML loader prints them (a definition list)
DIFF_OPTIONS = """## Options to diff

-B

--ignore-blank-lines

Ignore changes that just insert or delete blank lines.

-b

--ignore-space-change

Ignore changes in amount of white space. See Suppressing Differences in Blank and Tab Spacing.

-W columns

--width=columns

Output at most columns (default 130) print columns per line in side by side format.

-w

--ignore-all-space

Ignore white space when comparing lines. See Suppressing Differences in Blank and Tab Spacing.
"""

JNJ_TABLE = """Johnson & Johnson and Subsidiaries
Sales by geographic area
2022 | 2021 | % Change
U.S. | $48,580 | $47,156 | 3.0%
International | 46,363 | 46,619 | (0.6)%
Worldwide | 94,943 | 93,775 | 1.3%
"""


@pytest.mark.parametrize(("question", "first", "second"), [
    ("What is the difference between git fetch and git pull?", "git fetch", "git pull"),
    ("How does the connect timeout compare to the read timeout?", "connect timeout", "read timeout"),
    ("diff --brief vs diff --report-identical-files: what does each report?", "diff --brief",
     "diff --report-identical-files"),
    ("Do gzip and bz2 use the same default compression level?", "gzip", "bz2"),
    ("Is gzip faster than bz2?", "gzip", "bz2"),
    ("Is the params argument sent the same way as the data argument?", "params argument", "data argument"),
    ("What does an exit status of 1 mean for diff compared to diff3?", "diff", "diff3"),
    ("What is the difference between the -b and -w options of diff?", "-b", "-w"),
    ("How did JnJ's US sales growth compare to international sales growth in FY2022?", "US sales growth",
     "international sales growth"),
])
def test_the_two_sides_of_a_comparison_are_found(question, first, second):
    sides = comparison_sides(question)
    assert (sides.first, sides.second) == (first, second)


@pytest.mark.parametrize("question", [
    "Which option compares the subdirectories of two directories recursively?",
    "How do I compare two directories?", "What is the default compression level of gzip?",
    "Which program compares three files?", "What is the same-file check?"])
def test_a_question_that_compares_nothing_has_no_sides(question):
    assert comparison_sides(question) is None


_PERIODS = st.sampled_from(["Q2 of FY2023", "Q2 of FY2022", "FY2021", "2022", "fiscal 2024", "the second quarter of "
                            "2023", "the three months ended June 30, 2022", "FY23", "2020"])
_METRICS = st.sampled_from(["net earnings as a percent of sales", "revenue", "the effective tax rate",
                            "JnJ's adjusted EPS", "the number of stores"])


@given(metric=_METRICS, periods=st.lists(_PERIODS, min_size=2, max_size=2, unique=True),
       template=st.sampled_from(["Did {m} increase in {a} compared to {b}?", "How did {m} in {a} compare to {b}?",
                                 "Was {m} in {a} higher than in {b}?"]))
def test_one_thing_in_two_periods_is_not_a_comparison_of_two_things(metric, periods, template):
    """A side that is only a period ("Q2 of FY2022") makes a value question (the row read in both periods), not two
    subjects to quote one unit each for; the same question about two subjects still has two sides."""
    assert comparison_sides(template.format(m=metric, a=periods[0], b=periods[1])) is None
    assert comparison_sides(template.format(m=metric, a="Europe", b="Asia")) is not None


# sphinx-build's option list: each option's first sentence says what it is, the rest what it is not
BUILD_OPTIONS = """-a

If given, always write all output files. The default is to only write output files for new and changed
source files. (This may not apply to all builders.)

-E

Don't use a saved environment (the structure caching all cross-references), but rebuild it completely.
The default is to only read and parse source files that are new or have changed since the last run.

-q

Do not output anything on standard output, only write warnings and errors to standard error.

-Q

Do not output anything on standard output, also suppress warnings. Only errors are written to standard error.
"""


@pytest.mark.parametrize(("question", "first", "second"), [
    ("What is the difference between the -a and the -E options of sphinx-build?", ("-a",), ("-E",)),
    ("What is the difference between the -q and the -Q options?", ("-q",), ("-Q",)),
    ('What is the difference between "$*" and "$@" inside double quotes?', ("$*",), ("$@",)),
    ("How does a before_request function differ from a request_started signal handler?", ("before_request",),
     ("request_started",)),
])
def test_a_side_named_by_code_is_a_side_even_when_its_words_say_nothing(question, first, second):
    # "-a" has no word ("a" is a stop word), "-q" and "-Q" have the same one: the code name tells the sides apart
    sides = comparison_sides(question)
    assert sides is not None and (sides.first_code, sides.second_code) == (first, second)
    assert first[0] in side_question(question, sides, 0) and second[0] not in side_question(question, sides, 0)


@pytest.mark.parametrize(("question", "expected"), [
    ("What is the difference between the -a and the -E options of sphinx-build?",
     ["-a: If given, always write all output files.", "-E: Don't use a saved environment (the structure caching "
      "all cross-references), but rebuild it completely."]),
    ("What is the difference between the -q and the -Q options of sphinx-build?",
     ["-q: Do not output anything on standard output, only write warnings and errors to standard error.",
      "-Q: Do not output anything on standard output, also suppress warnings."]),
])
def test_each_option_is_answered_by_what_its_entry_says_first(question, expected):
    # with MiniLM, "The default is to only read ..." (of -E) and "Only errors are written ..." (of -Q) score higher
    # than the entries' first sentences; a comparison states what each side is
    decision = ExtractiveAnswerer(embedding="default").decide(
        question, [Document(page_content=BUILD_OPTIONS, metadata={"title": "sphinx-build"})])
    assert not decision.refused
    assert [s.text.removeprefix("sphinx-build: ") for s in decision.chosen] == expected


def test_each_side_is_asked_without_the_other_sides_own_words():
    question = "How did JnJ's US sales growth compare to international sales growth in FY2022?"
    sides = comparison_sides(question)
    assert side_question(question, sides, 0) == "How did JnJ's US sales growth sales growth in FY2022?"
    assert "international" in side_question(question, sides, 1) and "US" not in side_question(question, sides, 1)


def test_prose_both_sides_are_quoted_and_cited_not_a_neighbour_option():
    answer = ExtractiveAnswerer().invoke({
        "question": "What is the difference between the -b and -w options of diff?",
        "context": [Document(page_content=DIFF_OPTIONS, metadata={"title": "Options to diff"})]})
    assert "-b, --ignore-space-change: Ignore changes in amount of white space. [1]" in answer
    assert "-w, --ignore-all-space: Ignore white space when comparing lines. [1]" in answer
    assert "-B" not in answer and "-W" not in answer   # another option, case and all


def test_table_rows_both_sides_are_quoted_each_in_the_year_asked():
    # without an embedding a row's confidence is its key-term share only (here 0.25): the choice is tested, not refusal
    answer = ExtractiveAnswerer(min_confidence=0.2).invoke({
        "question": "How did JnJ's US sales growth compare to international sales growth in 2022?",
        "context": [Document(page_content="Sales grew in every segment in 2022 and remained strong."),
                    Document(page_content=JNJ_TABLE)]})
    assert "U.S. (2022: $48,580) [2]" in answer and "International (2022: 46,363) [2]" in answer
    assert [c for p in parse_answer(answer) for c in p.citations] == [2, 2]


def test_a_side_the_context_lacks_is_named_not_answered_from_the_other_side():
    context = [Document(page_content="An exit status of 0 means diff3 was successful, 1 means some conflicts were "
                                     "found, and 2 means trouble.", metadata={"title": "Invoking diff3"})]
    answerer = ExtractiveAnswerer()
    decision = answerer.decide("What does an exit status of 1 mean for sdiff compared to diff3?", context)
    assert not decision.refused and len(decision.chosen) == 1
    assert decision.text.endswith("The context does not say about sdiff.")
    gone = answerer.invoke({"question": "What is the difference between gzip and bz2?",
                            "context": [Document(page_content="The diff3 command compares three files.")]})
    assert gone == NO_ANSWER


def test_a_unit_defining_the_other_side_is_not_about_this_one():
    # the pull page's name line mentions fetching: it defines git pull, so the fetch side is said to be missing
    pull = "NAME\n\ngit-pull - Fetch from and integrate with another repository or a local branch\n"
    decision = ExtractiveAnswerer(embedding=None, min_confidence=0.0).decide(
        "What is the difference between git fetch and git pull?",
        [Document(page_content=pull, metadata={"title": "git-pull(1)", "source": "git-pull.html"})])
    assert [s.text for s in decision.chosen] == ["git-pull - Fetch from and integrate with another repository or a "
                                                 "local branch"]
    assert decision.note == "The context does not say about git fetch."


def test_sphinx_api_entries_label_their_description():
    chunk = ("## Authentication\n\nclass requests.auth.HTTPBasicAuth(username, password)[source]\n\nAttaches HTTP "
             "Basic Authentication to the given Request object.\n\nproperty content\n\nContent of the response, in "
             "bytes.\n\nrequests.get(url, params=None, **kwargs)[source]\n\nSends a GET request.\n\nParameters\n\n"
             "url – URL for the new Request object.")
    assert [u.text for u in units_of_chunk(chunk)] == [
        "requests.auth.HTTPBasicAuth: Attaches HTTP Basic Authentication to the given Request object.",
        "content: Content of the response, in bytes.", "requests.get(): Sends a GET request.",
        "url – URL for the new Request object."]


NAMES = st.lists(st.sampled_from(["zork", "quux", "frob", "blarg", "wibble", "snarf", "glorp", "fnord"]),
                 min_size=4, max_size=4, unique=True)
VERBS = ["merges", "splits", "encrypts", "archives", "renames", "prints"]
TEMPLATES = ["What is the difference between the {a} and {b} commands?", "How does {a} compare to {b}?",
             "{a} vs {b}: what does each do?", "Do {a} and {b} do the same thing?", "Is {a} faster than {b}?"]


@given(NAMES, st.permutations(VERBS), st.sampled_from(TEMPLATES), st.randoms(use_true_random=False))
@settings(max_examples=40, deadline=None)
def test_generated_comparisons_quote_one_unit_about_each_side(names, verbs, template, rnd):
    a, b, c, d = names
    facts = {n: f"The {n} command {v} files in place." for n, v in zip(names, verbs)}
    docs = [Document(page_content=facts[n], metadata={"title": f"{n}(1)"}) for n in (a, b, c, d)]
    rnd.shuffle(docs)
    decision = ExtractiveAnswerer().decide(template.format(a=a, b=b), docs)
    assert not decision.refused
    assert sorted(s.text for s in decision.chosen) == sorted([facts[a], facts[b]])   # each side once, no other


OPTION_NAMES = st.sampled_from(["-a", "-A", "-q", "-Q", "-e", "-E", "-u", "-n", "-N", "--force", "--full", "--sep"])
DESCRIPTIONS = ["Write every output file again", "Never print anything on standard output",
                "Rebuild the saved environment completely", "Stop at the first warning",
                "Keep the generated files", "Read the sources in parallel"]


@given(st.lists(OPTION_NAMES, min_size=3, max_size=5, unique=True), st.permutations(DESCRIPTIONS), st.data())
@settings(max_examples=30, deadline=None)
def test_generated_option_comparisons_state_each_options_own_entry(options, descriptions, data):
    # an option list: each entry's first sentence says what it does, a second one says what it does not;
    # "the -q and -Q options" are two sides (case and all), each answered by its own entry, never by another's
    entries = {o: d for o, d in zip(options, descriptions)}
    text = "\n\n".join(f"{o}\n\n{d}. Without it the tool behaves as usual." for o, d in entries.items())
    a, b = data.draw(st.permutations(options))[:2]
    decision = ExtractiveAnswerer(min_confidence=0.0).decide(
        f"What is the difference between the {a} and the {b} options?", [Document(page_content=text)])
    assert [s.text for s in decision.chosen] == [f"{a}: {entries[a]}.", f"{b}: {entries[b]}."]


@pytest.mark.parametrize("empty", ["See also pg_dumpall.", "pg_dumpall, pg_restore, psql",
                                   "pg_dump versus pg_dumpall tools", "The pg_dumpall tool should"])
def test_a_side_is_answered_by_a_statement_not_a_pointer_a_name_list_or_a_title(empty):
    context = [Document(page_content=f"## Backups\n\npg_dump is a utility for backing up a single database.\n\n{empty}\n\n"
                        "pg_dumpall writes out all databases of a cluster, with roles and tablespaces, into one script.",
                        metadata={"source": "backup.html"})]
    answer = ExtractiveAnswerer(embedding=None, min_confidence=0.0).invoke(
        {"question": "What is the difference between pg_dump and pg_dumpall?", "context": context})
    assert "single database" in answer and "all databases of a cluster" in answer, answer
    assert empty not in answer
