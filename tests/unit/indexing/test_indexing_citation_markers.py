"""Citation markers are the product's alone (issue 37, item 1): markers already in a document's text ("capital of
France.[2]", as in any Wikipedia export or paper) stay readable and are never parsed as the answer's citations."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag.base.text import neutralise_citation_markers
from rag.compose.knowledge_base import KnowledgeBase
from rag.checks.sentences import CITATION_PATTERN

_PIECE = st.one_of(st.text(max_size=12), st.sampled_from([
    "[2]", "[1, 3]", "[12]", "[ 4 ]", "[2-4]", "[2;5]", "\uff3b\uff12\uff3d", "[0]", "[^2]", "[[3]]", "France.",
    "\n", " ", "Paris[7]", "`x[1]`"]))
_TEXT = st.lists(_PIECE, max_size=20).map("".join)


@settings(max_examples=300, deadline=None)
@given(text=_TEXT)
def test_no_marker_survives_and_the_text_reads_the_same(text):
    out = neutralise_citation_markers(text)
    assert CITATION_PATTERN.search(out) is None
    assert neutralise_citation_markers(out) == out   # idempotent
    if "```" not in text and "~~~" not in text and "[^" not in text and "\uff3b" not in text:
        assert out.replace("[^", "[") == text   # only the marks were added


@settings(max_examples=100, deadline=None)
@given(code=st.lists(st.sampled_from(["argv[1]", "rows[0][2]", "f(x)[3]", " ", "\n", "x = "]), max_size=10)
       .map("".join))
def test_indexing_in_fenced_code_is_left_alone(code):
    text = f"Text.[2]\n```\n{code}\n```\nMore.[3]"
    out = neutralise_citation_markers(text)
    assert out == f"Text.[^2]\n```\n{code}\n```\nMore.[^3]"


def test_a_knowledge_base_stores_a_documents_footnotes_inert(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "wiki.md").write_text("# France\n\nParis is the capital of France.[2] It has 2.1 million people.[3]")
    kb = KnowledgeBase("docs", tmp_path / "store", embedding=DeterministicFakeEmbedding(size=8))
    kb.add_documents(str(folder))
    texts = [d.page_content for d in kb.get_documents()]
    assert texts and all(CITATION_PATTERN.search(t) is None for t in texts)
    assert "capital of France.[^2]" in " ".join(texts)
