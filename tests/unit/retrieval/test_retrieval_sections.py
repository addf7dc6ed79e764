"""Named sections: a question that names a part of the document gets that part's opening chunk."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from report_corpus import HEADER, report_chunks

from rag.base.errors import ConfigError, FilterError
from rag.compose.resource import Resource
from rag.compose.retrieve import retrieve
from rag.retrieval.lexical import BM25Retriever
from rag.retrieval.sections import (
    SectionRouter,
    heading_name,
    heading_terms,
)

DOC = "NORTHWIND_2023_10K"
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def router() -> SectionRouter:
    return SectionRouter(report_chunks())


def _named(router: SectionRouter, question: str) -> list[str]:
    return [s.heading for s in router.named(question)]


def test_headings_are_found_in_the_text_without_the_running_header(router):
    headings = router.headings(DOC)
    assert headings[:3] == ["Item 1. Business", "Item 1A. Risk Factors", "Results of Operations"]
    assert "Consolidated Balance Sheets" in headings and "Note 7. Acquisitions" in headings
    assert HEADER not in headings                       # printed atop every page: furniture, not a section
    assert not any(h[0].isdigit() for h in headings)    # table rows ("Net sales 6,104 5,600") are not headings


def test_a_named_statement_is_found_and_its_words_apart_are_not(router):
    assert _named(router, "What were total inventories at year end? Use the balance sheet.")[0] == \
        "Consolidated Balance Sheets"
    assert _named(router, "What is the FY2023 capex? Answer from the cash flow statement.") == \
        ["Consolidated Statements of Cash Flows"]
    # "balance" and "sheet" used apart do not name the balance sheet
    assert "Consolidated Balance Sheets" not in _named(router, "Did the sheet show the balance of cash?")


def test_word_forms_meet_and_numbering_labels_do_not_count(router):
    assert heading_terms("Acquisitions") == heading_terms("acquired")
    assert heading_name("Note 7. Acquisitions") == "Acquisitions"
    assert heading_name("Item 1A. Risk Factors") == "Risk Factors"
    assert heading_name("Consolidated Balance Sheets") == "Consolidated Balance Sheets"
    assert _named(router, "Which companies did Northwind acquire?") == ["Note 7. Acquisitions"]
    assert _named(router, "What are the main risk factors?") == ["Item 1A. Risk Factors"]


def test_words_every_chunk_shares_name_nothing(router):
    # the company name is on every page: it names no section, though a heading could contain it
    assert _named(router, "What does Northwind Traders do?") == []
    assert router.named("") == [] and router.named("the of and") == []


def test_section_metadata_is_used_when_present_and_text_detection_when_not():
    labelled = [Document(page_content=c.page_content, metadata={**c.metadata, "section": "Our Cash Position"})
                if c.metadata["page"] == 5 else c for c in report_chunks(sections=True)]
    auto = SectionRouter(labelled)
    assert "Our Cash Position" in auto.headings(DOC)
    assert "Total current assets 1,655 1,498" not in auto.headings(DOC)
    assert "Consolidated Balance Sheets" not in auto.headings(DOC)   # metadata present: text is not scanned
    assert "Consolidated Balance Sheets" in SectionRouter(labelled, detect=True).headings(DOC)
    assert SectionRouter(report_chunks(), detect=False).headings(DOC) == []


def test_promote_puts_the_opening_chunk_after_the_top_results(router):
    chunks = report_chunks()
    ranked = [(c, 1.0 - i / 100) for i, c in enumerate(chunks) if c.metadata["page"] not in (5, 6)][:10]
    promoted, named = router.promote("What were inventories? Base it on the balance sheet.", ranked, at=3)
    assert [s.heading for s in named][0] == "Consolidated Balance Sheets"
    assert promoted[:3] == ranked[:3]
    opening = promoted[3][0]
    assert opening.metadata["page"] == 5 and "Consolidated Balance Sheets" in opening.page_content
    assert opening.metadata["section_match"]["heading"] == "Consolidated Balance Sheets"
    assert promoted[3][1] == ranked[2][1]
    rest = [d.id for d, _ in promoted[3 + len([s for s in named if s.chunk.id not in {d.id for d, _ in ranked[:3]}]):]]
    assert rest == [d.id for d, _ in ranked[3:] if d.id not in {s.chunk.id for s in named}]
    assert len({d.id for d, _ in promoted}) == len(promoted)


def test_promote_keeps_a_chunk_already_at_the_top_and_changes_nothing_when_nothing_is_named(router):
    chunks = report_chunks()
    opening = next(c for c in chunks if "Consolidated Balance Sheets" in c.page_content)
    ranked = [(opening, 2.0)] + [(c, 1.0) for c in chunks[:5]]
    promoted, _ = router.promote("Total assets on the balance sheet?", ranked, at=3)
    assert [d.id for d, _ in promoted].count(opening.id) == 1 and promoted[0][0].id == opening.id
    unchanged, named = router.promote("What does Northwind Traders do?", ranked, at=3)
    assert named == [] and unchanged == ranked


def test_sections_are_looked_up_in_the_documents_search_found():
    chunks = report_chunks() + report_chunks(doc_id="OTHER_2023_10K")
    router = SectionRouter(chunks, key="doc_id")
    question = "What were inventories? Use the balance sheet."
    ours = [(c, 1.0) for c in chunks if c.metadata["doc_id"] == DOC][:6]
    _, named = router.promote(question, ours)
    assert {s.document for s in named} == {DOC}
    assert {s.document for s in router.named(question, ["OTHER_2023_10K"])} == {"OTHER_2023_10K"}
    assert len(router.named(question)) == 2            # top_n over all documents


def test_retrieve_records_the_step_and_the_context_gains_the_statement():
    chunks = report_chunks()
    # a dense store whose ranking knows nothing of headings (as MiniLM barely does for number tables)
    resource = Resource.from_documents("report", chunks, embedding=DeterministicFakeEmbedding(size=32))
    question = "What were Northwind's inventories and receivables? Base the answer on the balance sheet."
    plain = retrieve(question, resource, k=3, max_tokens=None)
    result = retrieve(question, resource, k=3, max_tokens=None, sections=SectionRouter(chunks), section_at=2)
    opening = next(c for c in chunks if "Consolidated Balance Sheets" in c.page_content)
    assert opening.page_content not in [d.page_content for d in plain.context]
    named = [s["heading"] for s in result.extras["sections"]]
    # promoted chunks take places within k: after min(section_at, k - top_n) = 1 result here
    assert len(result.context) == 3 and result.context[0].page_content == plain.context[0].page_content
    assert [d.metadata["section_match"]["heading"] for d in result.context[1:]] == named
    assert result.context[1].page_content == opening.page_content
    wide = retrieve(question, resource, k=6, max_tokens=None, sections=SectionRouter(chunks), section_at=2)
    assert [d.page_content for d in wide.context[:2]] == [d.page_content for d in plain.context[:2]]
    assert wide.context[2].page_content == opening.page_content
    assert result.extras["sections"][0]["heading"] == "Consolidated Balance Sheets"
    assert "sections" in result.stages and "sections" in result.timings
    with pytest.raises(ConfigError, match="SectionRouter"):
        retrieve(question, resource, sections="balance sheet")


def test_promotion_never_widens_the_filter():
    chunks = report_chunks()
    router = SectionRouter(chunks)
    question = "What were inventories? Use the balance sheet."
    kept = [s.heading for s in router.named(question, filter={"page": {"$ne": 5}})]
    assert "Consolidated Balance Sheets" not in kept and kept == ["Note 4. Inventories"]
    resource = Resource.from_retriever("report", BM25Retriever.from_documents(chunks, k=4))
    result = retrieve(question, resource, k=3, max_tokens=None, sections=router, filter={"page": {"$ne": 5}})
    assert all(d.metadata["page"] != 5 for d in result.context)
    with pytest.raises(FilterError, match="near"):
        router.named(question, filter={"page": {"$near": 5}})


def test_markdown_sections_of_the_project_docs_are_named():
    from rag.indexing.chunking import TokenChunker
    from rag.indexing.loaders import load_directory

    docs = load_directory(ROOT / "docs").documents
    chunks = TokenChunker(chunk_size=120).split_documents(docs)
    router = SectionRouter(chunks)
    named = router.named("How does relevant segment extraction pick the segments?")
    assert named and "segment" in named[0].heading.lower()
    assert named[0].chunk.metadata["section"].split(" / ")[0] == named[0].heading or \
        named[0].heading in named[0].chunk.page_content


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"min_score": -1}, "min_score"), ({"top_n": 0}, "top_n"), ({"prefix": -2}, "prefix"),
    ({"detect": "sometimes"}, "detect"),
])
def test_bad_settings_say_what_is_valid(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        SectionRouter(report_chunks(), **kwargs)


def test_bad_promote_position_and_a_source_without_chunks_are_rejected(router):
    with pytest.raises(ConfigError, match="at must be"):
        router.promote("q", [], at=-1)
    with pytest.raises(ConfigError, match="get_documents"):
        SectionRouter.from_source(object())
    from rag.retrieval.lexical import BM25Index

    assert SectionRouter.from_source(BM25Index.from_documents(report_chunks())).headings(DOC)


def test_a_name_heading_two_places_promotes_the_place_search_ranks_better():
    chunks = report_chunks()
    mdna = Document(page_content="Acquisitions\nWe look for small seafood and bakery distributors to buy each year.",
                    id="mdna-acq", metadata={"doc_id": DOC, "page": 2, "chunk_index": 6.5})
    router = SectionRouter([*chunks, mdna])
    question = "Which companies did Northwind acquire in 2023?"
    (section,) = router.named(question)
    assert [h for h, _ in section.occurrences] == ["Acquisitions", "Note 7. Acquisitions"]
    note = next(c for c in chunks if "Harbor Seafood" in c.page_content)
    ranked = [(c, 1.0) for c in chunks[:3]] + [(note, 0.5)]
    promoted, _ = router.promote(question, ranked, at=3)
    assert promoted[3][0].metadata["section_match"]["heading"] == "Note 7. Acquisitions"
    assert "Note 7. Acquisitions" in promoted[3][0].page_content
    # nothing of either place among the results: the first place in the document
    promoted, _ = router.promote(question, [(c, 1.0) for c in chunks[:3]], at=3)
    assert promoted[3][0].id == "mdna-acq"


def test_a_repeated_column_header_and_a_number_only_heading_name_nothing():
    chunks = report_chunks()
    extra = [Document(page_content=f"Year Ended\nSegment {i} sales 1{i}0 1{i}5", id=f"seg-{i}",
                      metadata={"doc_id": DOC, "page": 20 + i, "chunk_index": 100 + i}) for i in range(5)]
    extra.append(Document(page_content="PART II. 3\nOther information follows.", id="part",
                          metadata={"doc_id": DOC, "page": 30, "chunk_index": 200}))
    router = SectionRouter([*chunks, *extra], min_score=0.5)
    assert "Year Ended" not in router.headings(DOC)          # printed in 5 of 34 chunks: a column header
    assert "PART II. 3" in router.headings(DOC)
    named = [s.heading for s in router.named("What were the 3 year ended sales?")]
    assert "Year Ended" not in named and "PART II. 3" not in named
    assert "PART II. 3" not in [s.heading for s in SectionRouter([*chunks, *extra], min_score=0).named("part 3")]


def test_airag_passes_the_router_to_retrieval_and_the_statement_reaches_the_context():
    from rag import RAG
    from rag.compose.airag import airag

    chunks = report_chunks()
    rag = RAG(resources=[Resource.from_documents("report", chunks, embedding=DeterministicFakeEmbedding(size=32))])
    result = airag(rag, "What were inventories? Use the balance sheet.", sections=SectionRouter(chunks), k=3,
                   return_all=True)
    assert result.extras["sections"][0]["heading"] == "Consolidated Balance Sheets"
    assert any("Consolidated Balance Sheets" in d.page_content for d in result.context)
    assert result.final_answer


def test_a_resources_section_router_promotes_within_k_and_keeps_the_filter():
    chunks = report_chunks()
    base = Resource.from_documents("report", chunks, embedding=DeterministicFakeEmbedding(size=32))
    sectioned = base.model_copy(update={"sections": SectionRouter(chunks)})
    question = "What were Northwind's inventories and receivables? Base the answer on the balance sheet."
    plain = [d.page_content for d in retrieve(question, base, k=3, page_diversity=0).context]
    found = retrieve(question, sectioned, k=3, page_diversity=0).context
    assert len(found) == 3 and found[0].page_content == plain[0]
    assert any("Consolidated Balance Sheets" in d.page_content for d in found)
    assert not any("Consolidated Balance Sheets" in p for p in plain)
    kept = retrieve(question, sectioned, k=3, page_diversity=0, filter={"page": {"$ne": 5}}).context
    assert len(kept) == 3 and all(d.metadata["page"] != 5 for d in kept)


async def test_the_section_stage_runs_in_async_chains_too():
    from rag import RAG

    chunks = report_chunks()
    resource = Resource.from_retriever("report", BM25Retriever.from_documents(chunks), sections=SectionRouter(chunks))
    out = await RAG(resources=[resource]).chain().ainvoke("Which companies were acquired?",
                                                          config={"configurable": {"k": 2}})
    assert len(out["context"]) == 2 and any("Acquisitions" in d.page_content for d in out["context"])
