"""reStructuredText titles become `#` headings; no other text is changed or lost."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rag.indexing.chunking import split_sections
from rag.indexing.rst import rst_to_markdown


def test_underlined_and_overlined_titles_get_levels_in_order_of_appearance():
    text = ("=====\nGuide\n=====\n\nIntro.\n\nInstall\n-------\n\nRun it.\n\nLinux\n~~~~~\n\nApt.\n\n"
            "Usage\n-----\n\nCall it.\n")
    converted, title = rst_to_markdown(text)
    assert title == "Guide"
    assert [s[0] for s in split_sections(converted)] == ["Guide", "Install", "Linux", "Usage"]
    assert "## Install\n" in converted and "### Linux\n" in converted and "## Usage\n" in converted


def test_a_transition_or_a_short_rule_under_prose_is_not_a_title():
    text = "Para one.\n\n----\n\nPara two\ncontinues here.\n"
    assert rst_to_markdown(text) == (text, None)


_line = st.one_of(st.text(alphabet="abc XYZ.,", min_size=0, max_size=20),
                  st.sampled_from(["=====", "-----", "~~~", "", "Title"]))


@settings(max_examples=200, deadline=None)
@given(lines=st.lists(_line, max_size=30))
def test_every_word_of_the_text_is_kept(lines):
    text = "\n".join(lines)
    converted, _ = rst_to_markdown(text)
    # a run of one punctuation character (=, -, ~, .) may be a title adornment, which the conversion consumes;
    # a definition's ": " mark is added (the alphabet has no ":")
    words = [w for line in lines for w in line.split() if not set(w) <= set("=-~.")]
    kept = [w for line in converted.splitlines() for w in line.split() if not set(w) <= set("=-~.#") and w != ":"]
    assert kept == words


def test_definition_lists_become_term_and_description_lines_and_other_indents_stay():
    text, _ = rst_to_markdown("Intro.\n\nwork_area\n    Memory for one sort,\n    per operation.\n\n    More.\n\n"
                              "- a bullet\n  continued\n\n.. note::\n   A note.\n\nExample::\n\n    code\n\n"
                              ":field: value\n   more\n")
    assert text.splitlines()[:6] == ["Intro.", "", "work_area", ": Memory for one sort,", "per operation.", ""]
    assert "    More.\n" in text and "- a bullet\n  continued\n" in text and ".. note::\n   A note.\n" in text
    assert "Example::\n\n    code\n" in text and ":field: value\n   more\n" in text


def test_an_rst_definition_reaches_the_chunk_metadata(tmp_path):
    from rag.indexing.chunking import split_documents
    from rag.indexing.definitions import definitions
    from rag.indexing.loaders import load_file

    path = tmp_path / "guide.rst"
    path.write_text("Guide\n=====\n\nwork_area\n    Memory for one sort.\n", encoding="utf-8")
    (chunk,) = split_documents(load_file(path))
    assert [(d["term"], d["description"]) for d in definitions(chunk.metadata)] == [("work_area", "Memory for one sort.")]
