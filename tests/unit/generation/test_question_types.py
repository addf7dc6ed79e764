"""The offline answerer answers the question asked: question types, names, refusal, labelled quotes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document

from rag.generation.extractive import NO_ANSWER, ExtractiveAnswerer
from rag.generation.postprocess import check_answer
from rag.generation.question_types import (
    has_answer_of_type,
    missing_names,
    name_match,
    names_in,
    question_type,
    title_name,
)

MANUAL = [
    Document(page_content="GNU diff can treat lower case letters as equivalent to their upper case counterparts, "
                          "so that it considers them the same. To request this, use the -i or --ignore-case option.",
             metadata={"source": "Comparison.html", "title": "Comparison"}),
    Document(page_content="Case differences matter in file comparisons of case-sensitive file systems, and diff "
                          "compares the case of each letter in both files by default.",
             metadata={"source": "Overview.html", "title": "Overview"}),
    Document(page_content="If you do not specify lines, it defaults to three. Larger values give more context.",
             metadata={"source": "Output.html", "title": "Output Formats"}),
    Document(page_content="# git-stash(1) Manual Page\n\nThe command saves your local modifications away and "
                          "reverts the working directory to match the HEAD commit.",
             metadata={"source": "git-stash.html", "title": "git-stash(1)"}),
]


@pytest.mark.parametrize(("question", "expected"), [
    ("Which option makes diff ignore case?", "identifier"),
    ("Which command saves my changes away?", "identifier"),
    ("How many lines of context are shown by default?", "number"),
    ("What extension does patch add to backups?", "extension"),
    ("Where does patch put rejected hunks in files?", "extension"),
    ("Why does patch strip slashes?", "reason"),
    ("How do I compare two directories?", "procedure"),
    ("Where is the Colosseum?", "open"),
    # a default is a number only when it is a quantity
    ("What is the default journal mode of a database connection?", "open"),   # DELETE: a word, not a number
    ("What is the default conflict resolution algorithm?", "open"),
    ("What is the default compression level of gzip?", "number"),
    ("What is the default maximum number of columns in a table?", "number"),
    ("What is the default read timeout?", "number"),
])
def test_question_type_says_what_the_answer_must_hold(question, expected):
    assert question_type(question) == expected


def test_an_identifier_the_question_names_is_not_an_answer_to_it():
    assert not has_answer_of_type("Run git clone to copy it.", "identifier", "Which git clone option is shallow?")
    assert has_answer_of_type("--depth: Create a shallow clone.", "identifier", "Which git clone option is shallow?")
    # a command question is answered by the command a page is about (its title), not by an option
    assert has_answer_of_type("The command saves changes.", "identifier", "Which command saves?", "git-stash(1)")
    assert not has_answer_of_type("--depth: Create a shallow clone.", "identifier", "Which command clones?")


def test_names_are_proper_nouns_and_mixed_words_not_fiscal_periods():
    assert names_in("What was Netflix's FY2017 revenue in Q2?") == ["Netflix"]
    assert names_in("which option ignores case?") == []
    assert missing_names("Did JnJ and Best Buy grow?", "Johnson & Johnson ... BESTBUY_2024Q2_10Q") == []
    assert missing_names("What port does PostgreSQL use?", "diff compares files") == ["PostgreSQL"]


def test_title_name_and_name_match():
    assert title_name("json — JSON encoder and decoder") == "json" and title_name("Comparing Three Files") == ""
    assert name_match("-w, --ignore-all-space: x", "ignore all white space?") > \
        name_match("-b, --ignore-space-change: x", "ignore all white space?")


def test_the_unit_holding_the_option_answers_not_the_one_sharing_most_words():
    out = ExtractiveAnswerer(min_confidence=0.0).invoke({"question": "Which option makes diff ignore case differences?",
                                                        "context": MANUAL})
    assert "--ignore-case" in out and out.endswith("[1]") and "Case differences matter" not in out


def test_a_number_question_gets_one_value():
    out = ExtractiveAnswerer(min_confidence=0.0).invoke({"question": "How many lines of context by default?",
                                                        "context": MANUAL})
    assert out == "If you do not specify lines, it defaults to three. [3]"


def test_a_command_question_names_the_page_and_the_label_still_counts_as_quoted():
    question = "Which command saves my local modifications away?"
    out = ExtractiveAnswerer(min_confidence=0.0).invoke({"question": question, "context": MANUAL})
    assert out.startswith("git-stash(1): The command saves your local modifications away") and out.endswith("[4]")
    checks = check_answer(out, MANUAL, embedding=None, question=question)
    assert checks.support[0].quoted and checks.support[0].answers and checks.flags == []


def test_a_question_naming_what_the_context_never_mentions_is_refused():
    answerer = ExtractiveAnswerer(min_confidence=0.0)
    decision = answerer.decide("What port does PostgreSQL listen on by default?", MANUAL)
    assert decision.refused and "PostgreSQL" in decision.reason
    assert answerer.invoke({"question": "What port does PostgreSQL listen on?", "context": MANUAL}) == NO_ANSWER


def test_refusal_threshold_on_confidence():
    question = "Which lines are larger?"
    assert not ExtractiveAnswerer(min_confidence=0.0).decide(question, MANUAL).refused
    strict = ExtractiveAnswerer(min_confidence=0.99).decide(question, MANUAL)
    assert strict.refused and strict.chosen and strict.reason.startswith("confidence")


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=120))
def test_any_question_gets_no_answer_or_quoted_context(question):
    out = ExtractiveAnswerer(min_confidence=0.0).invoke({"question": question, "context": MANUAL})
    assert out == NO_ANSWER or all(s.quoted for s in check_answer(out, MANUAL, embedding=None).support
                                   if s.label != "no_answer")
    question_type(question), names_in(question), missing_names(question, "text")


def test_a_sentence_quoting_the_question_is_about_it_and_does_not_answer_it():
    docs = [Document(page_content='Before this rule, a heading was the best match for "Which embedding model is '
                                  'used by default?" on the project docs.'),
            Document(page_content="The default embedding model is all-MiniLM-L6-v2, shipped in a wheel.")]
    out = ExtractiveAnswerer(min_confidence=0.0).invoke({"question": "Which embedding model is used by default?",
                                                        "context": docs})
    assert out.startswith("The default embedding model is all-MiniLM-L6-v2") and "Before this rule" not in out


@pytest.mark.parametrize(("question", "sentence", "kind"), [
    ("Which keyword argument passes parameters in the query string?",
     "Requests lets you provide them as a dictionary, using the params keyword argument.", True),
    ("Which Response property tracks the redirects that were followed?",
     "We can use the history property of the Response object to track redirection.", True),
    ("Which argument turns off certificate verification?",
     "The same argument is accepted by every method.", False),   # "the same argument" names nothing
])
def test_prose_that_names_a_parameter_or_attribute_holds_an_identifier(question, sentence, kind):
    assert has_answer_of_type(sentence, question_type(question), question) is kind


def test_the_answers_signal_reads_the_asking_sentence_not_the_instructions():
    from rag.generation.relevance import answer_relevance

    asked = "What were the restructuring costs in FY2022?"
    long = asked + " If restructuring costs are not explicitly outlined then state 0. Answer in USD millions."
    row = "Restructuring and impairment charges (2022: 411)"
    short, with_instructions = (answer_relevance(q, [row], embedding=None)[0] for q in (asked, long))
    assert with_instructions.relevance == short.relevance > 0.45   # FY2022 matched as the year 2022
    assert with_instructions.answers()


def test_a_default_that_is_a_word_is_stated_not_refused():
    context = [Document(page_content="An SQLite database connection defaults to journal_mode=DELETE. The journal "
                                     "mode can be changed with a pragma.", metadata={"title": "Journal modes"})]
    said = ExtractiveAnswerer().invoke({"question": "What is the default journal mode of a database connection?",
                                        "context": context})
    assert said.startswith("An SQLite database connection defaults to journal_mode=DELETE. [1]")


def test_which_noun_questions_are_answered_by_a_unit_naming_one():
    context = [Document(page_content="Enforcement of foreign keys is turned off by default, for backwards "
                                     "compatibility. Applications turn it on at run-time with the PRAGMA foreign_keys "
                                     "statement.", metadata={"title": "Foreign Key Support"})]
    said = ExtractiveAnswerer(max_sentences=1).invoke(
        {"question": "Which pragma turns on enforcement of foreign keys?", "context": context})
    assert "PRAGMA foreign_keys" in said   # not the sentence that only repeats "enforcement of foreign keys"


@given(noun=st.sampled_from(["lock", "pragma", "function", "clause"]),
       name=st.from_regex(r"[A-Z]{2,8}|[a-z]{2,6}_[a-z]{2,6}|[a-z]{2,6}\(\)", fullmatch=True),
       filler=st.text(st.characters(whitelist_categories=("Ll", "Zs")), max_size=30))
@settings(max_examples=60, deadline=None)
def test_a_name_next_to_the_asked_noun_is_an_instance_and_the_noun_alone_is_not(noun, name, filler):
    from rag.generation.answer_kinds import instance_of

    question = f"Which {noun} lets readers in?"
    assert instance_of(question, [f"{filler} the {name} {noun} lets readers in."]) == [True]
    assert instance_of(question, [f"{filler} a {noun} lets readers in."]) == [False]


@pytest.mark.parametrize(("question", "context", "missing"), [
    ("How do I publish my documentation on Read the Docs?", "Read docs/index.txt for an overview.", ["Read the Docs"]),
    ("How do I publish my documentation on Read the Docs?", "Projects are hosted on Read the\nDocs.", []),
    ("What was Best Buy's revenue in the quarter?", "Best Buy reported revenue of $9.6 billion.", []),
    ("Which extension does Visual Studio Code use?", "Code is visual. A studio uses extensions.", ["Visual Studio Code"]),
])
def test_a_name_of_several_words_must_be_in_the_context_as_a_phrase(question, context, missing):
    assert missing_names(question, context) == missing


@given(st.from_regex(r"[a-z]{2,6}(_[a-z0-9]{2,6}){1,3}", fullmatch=True))
@settings(max_examples=50, deadline=None)
def test_a_code_name_the_context_never_mentions_is_missing(name):
    """A question naming a snake_case code name (pg_cron, mean_exec_time) the context never mentions is about
    something else: the answerer says "I don't know" rather than quote a sentence sharing its other words."""
    question = f"How do I schedule a nightly VACUUM with {name}?"
    assert missing_names(question, "VACUUM commands are executed on a schedule by cron.") == [name]
    assert missing_names(question, f"Use {name.upper()} to schedule VACUUM.") == []   # mentioned: any case
