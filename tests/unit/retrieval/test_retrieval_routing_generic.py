"""Routing on a generic corpus of many similar documents never loses a question no routing finds.

The corpus imitates a documentation set of command pages (`tool-show(1)`, `tool-http-fetch(1)`,
`tool-patch-id(1)` ...): every page's name is also an ordinary word of the others' text ("show the
log", "over HTTP", "the object ID"). Questions name one page (in lower case, as people write
commands) and add such words written as names: at the start of a sentence ("Show ..."), in Title Case
("the Push URL"), as acronyms ("HTTP", "ID"), or another page's real name ("Patch ID"). The knowledge base's router (routing on) must keep every
question's page in the context whenever routing off finds it; a word only one page uses still routes.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag import KnowledgeBase, retrieve
from rag.indexing.chunking import TokenChunker

# page name -> a word only that page uses (what a question about it asks)
PAGES = {"show": "amber", "log": "birch", "merge": "cedar", "merge-base": "dahlia", "http-fetch": "elm",
         "http-push": "fern", "patch-id": "ginkgo", "push": "hazel", "fetch": "iris", "remote": "juniper",
         "clone": "kelp", "tag": "lilac", "status": "maple", "archive": "nettle", "config": "olive",
         "svn": "poplar"}
# words every page uses: ordinary vocabulary of this corpus, although some pages are named after them
COMMON = ["show", "log", "merge", "push", "fetch", "remote", "archive", "tag", "status", "config", "http", "id"]
TRAPS = ["Show", "Log", "Merge", "Push", "Fetch", "Remote", "Archive", "Tag", "Status", "Config", "HTTP", "ID",
         "URL", "Patch ID", "Merge Base"]


def _page(name: str, word: str) -> Document:
    text = (f"tool {name} handles the {word} setting. The {word} value of tool {name} is read at start.\n\n"
            f"Use the --{word} option to change the {word}. "
            "Commands show the log, merge and push over HTTP to a remote URL, fetch a tag, print the status, "
            "archive the config and name each object by its ID.\n\n"
            f"See also: the {word} section of this page.")
    return Document(page_content=text, metadata={"source": f"/docs/tool-{name}.html", "title": f"tool-{name}(1)"})


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    kb = KnowledgeBase("tools", tmp_path_factory.mktemp("kb"), embedding=DeterministicFakeEmbedding(size=16),
                       chunker=TokenChunker.sized(40))
    kb.add_documents([_page(n, w) for n, w in PAGES.items()])
    return kb


def _pages(kb, resource, question):
    return [d.metadata["source"].rsplit("/", 1)[-1] for d in retrieve(question, resource, k=4).context]


@settings(max_examples=40, deadline=None)
@given(page=st.sampled_from(sorted(PAGES)), traps=st.lists(st.sampled_from(TRAPS), min_size=1, max_size=3),
       form=st.sampled_from(["{t0} first: how does tool {page} use the {word}?",
                             "How does tool {page} set the {word} with the {t0} {t1}?",
                             "{t0} or {t1}? Which {word} does tool {page} read over {t2}?",
                             "In tool {page}, is the {word} the {t0} of the {t2}?"]))
def test_routing_on_keeps_every_page_routing_off_finds(kb, page, traps, form):
    traps = (traps * 3)[:3]
    question = form.format(t0=traps[0], t1=traps[1], t2=traps[2], page=page, word=PAGES[page])
    gold = f"tool-{page}.html"
    off = _pages(kb, kb.as_resource(search="bm25", routing="off"), question)
    on = _pages(kb, kb.as_resource(search="bm25", routing="on"), question)
    assert gold not in off or gold in on, (question, off, on)


def test_a_word_only_one_page_uses_still_routes(kb):
    router = kb.as_resource(search="bm25", routing="on").router
    assert router.route("How do I import history from SVN?").values == [
        r.doc_id for r in kb.list_documents() if r.source.endswith("tool-svn.html")]
    assert router.route("How do I fetch over HTTP by object ID?").values == []   # common words of this corpus
    assert router.route("Show the Log of a Merge").values == []                   # capitalised, still common words
