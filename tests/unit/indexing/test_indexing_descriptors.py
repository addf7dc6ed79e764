"""Opening a knowledge base, searching it and closing it leaves no file descriptor open (issue 37).

Chroma keeps one system per store directory (its database connections, vector index files, threads)
until every client of it is closed; a knowledge base that opened its client closes it in `close()`, so a
process that opens many knowledge bases (a test suite, a notebook, a server per tenant) does not run out of
descriptors. Measured before the fix: 11 descriptors per knowledge base opened, searched and closed.
"""

from __future__ import annotations

import gc
import os

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag.compose.knowledge_base import KnowledgeBase

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts /proc/self/fd")


def _open_fds() -> int:
    gc.collect()
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.parametrize("search", ["dense", "bm25", "hybrid"])
def test_twenty_open_search_close_cycles_leave_the_descriptor_count_flat(tmp_path, search):
    def cycle(n: int) -> None:
        store = tmp_path / f"store{n}"
        kb = KnowledgeBase("docs", store, embedding=DeterministicFakeEmbedding(size=8))
        kb.add_documents([Document(page_content=f"Town {i} is a place.", metadata={"source": f"s{i}"})
                          for i in range(5)])
        kb.close()
        kb = KnowledgeBase("docs", store, embedding=DeterministicFakeEmbedding(size=8))
        assert kb.as_resource(search=search).retriever.invoke("town")
        assert kb.count() == 5
        kb.close()

    cycle(0)
    before = _open_fds()
    for n in range(1, 21):
        cycle(n)
    assert _open_fds() - before <= 2   # (a stray descriptor of the interpreter's own is not a leak per cycle)


def test_a_closed_knowledge_base_reopens_its_store_on_next_use(tmp_path):
    kb = KnowledgeBase("docs", tmp_path, embedding=DeterministicFakeEmbedding(size=8))
    kb.add_documents([Document(page_content="Paris is a capital.", metadata={"source": "p"})])
    kb.close()
    assert kb.count() == 1 and len(kb.list_documents()) == 1
    assert kb.as_retriever(k=1).invoke("capital")[0].page_content.endswith("Paris is a capital.")
    kb.close()
