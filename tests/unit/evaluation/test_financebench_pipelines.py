"""FinanceBench configurations on the synthetic data set: every one runs through `rag.retrieve`, within budget."""

from __future__ import annotations

import json

import numpy as np
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag.base.errors import ConfigError
from rag.cli import main as cli_main
from rag.compose.retrieve import retrieve
from rag.evaluation.financebench import FinanceBenchData, chunk_pages
from rag.evaluation.financebench_corpus import CONTEXT_VIEW, TEXT_VIEW, BenchCorpus
from rag.evaluation.financebench_pipelines import (
    CONFIGURATIONS,
    LibraryConfiguration,
    ranked_documents,
    run_financebench,
)
from rag.evaluation.financebench_run import document_pages, estimate_tokens
from rag.indexing.autocontext import AutoContext
from rag.retrieval.hybrid import HybridRetriever
from rag.stores.memory import ExactRetriever
from rag.testing.financebench import write_synthetic_financebench


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    root = tmp_path_factory.mktemp("fb")
    data_dir = write_synthetic_financebench(root / "data")
    data = FinanceBenchData.load(data_dir)
    corpus = BenchCorpus.build(data, cache_dir=root / "cache", chunk_size=300,
                               embeddings=DeterministicFakeEmbedding(size=32))
    return data_dir, data, corpus, root


def test_every_configuration_returns_a_context_within_the_budget(synthetic):
    _, data, corpus, _ = synthetic
    for name, (_, spec) in CONFIGURATIONS.items():
        pipeline = LibraryConfiguration(corpus, spec, budget=150)
        for doc_name in ("ACME_2022_10K", None):
            result = pipeline.retrieve(data.questions[0].question, doc_name=doc_name)
            tokens = sum(estimate_tokens(d.page_content) for d in result.context)
            assert 0 < tokens <= 150, name
            assert result.ranked, name
            if doc_name is not None:
                assert {d.metadata["doc_name"] for d in result.context} == {doc_name}, name


def test_a_configuration_is_exactly_rag_retrieve_with_its_settings(synthetic):
    _, data, corpus, _ = synthetic
    for name in ("full", "full-kw", "rse", "neighbours"):
        pipeline = LibraryConfiguration(corpus, CONFIGURATIONS[name][1], budget=300)
        for question in data.questions[:3]:
            for doc_name in (question.doc_name, None):
                got = pipeline.retrieve(question.question, doc_name=doc_name)
                direct = retrieve(question.question, pipeline.resource, **pipeline.settings(doc_name))
                assert [d.page_content for d in got.context] == [d.page_content for d in direct.context], name
                assert [d.id for d in got.ranked] == [d.id for d in ranked_documents(direct)[:50]], name


def test_configurations_map_to_library_settings(synthetic):
    _, _, corpus, _ = synthetic
    full = LibraryConfiguration(corpus, CONFIGURATIONS["full"][1])
    shared, single = full.settings(None), full.settings("ACME_2022_10K")
    assert shared["routing"] == "both" and shared["router"] is corpus.document_router()
    assert "router" not in single and single["filter"] == {"doc_name": "ACME_2022_10K"}
    assert shared["rerank_depth"] == 50 and shared["rerank_weight"] == 0.5 and shared["reranker"].by_sentence
    assert shared["token_counter"].name == "chars/4" and shared["sections"] is corpus.section_router()
    assert isinstance(full.resource.retriever, HybridRetriever)
    assert full.resource.retriever.vectorstore.views == {TEXT_VIEW: 0.0, CONTEXT_VIEW: 1.0}
    mix = LibraryConfiguration(corpus, CONFIGURATIONS["full-mix"][1])
    assert mix.resource.retriever.vectorstore.views == {TEXT_VIEW: 0.5, CONTEXT_VIEW: 0.5}
    assert isinstance(LibraryConfiguration(corpus, CONFIGURATIONS["dense"][1]).resource.retriever, ExactRetriever)
    kw = LibraryConfiguration(corpus, CONFIGURATIONS["full-kw"][1]).settings(None)
    assert kw["rephrase"] == ["keywords"] and kw["question_weight"] == 0.5


def test_bm25_finds_the_evidence_page_of_a_keyword_question(synthetic):
    _, _, corpus, _ = synthetic
    bm25 = LibraryConfiguration(corpus, CONFIGURATIONS["bm25"][1], budget=80)
    result = bm25.retrieve("patent lawsuit guidance systems", doc_name="ACME_2022_10K")
    assert document_pages(result.context[0]) == {("ACME_2022_10K", 3)}


def test_routing_searches_only_the_named_company_and_year(synthetic):
    _, _, corpus, _ = synthetic
    routed = LibraryConfiguration(corpus, CONFIGURATIONS["routing"][1], budget=4000)
    result = routed.retrieve("Did Globex Foods raise its dividend in 2023?", doc_name=None)
    assert {d.metadata["doc_name"] for d in result.context} == {"GLOBEX_2023_10K"}
    result = routed.retrieve("What were Acme Rockets' net sales in FY2022?", doc_name=None)
    assert {d.metadata["doc_name"] for d in result.context} == {"ACME_2022_10K"}


def test_neighbour_and_segment_contexts_list_every_page_they_cover(synthetic):
    _, data, corpus, _ = synthetic
    for name in ("neighbours", "rse"):
        result = LibraryConfiguration(corpus, CONFIGURATIONS[name][1], budget=400).retrieve(
            data.questions[1].question, doc_name="ACME_2023_10K")
        for doc in result.context:
            assert doc.metadata["pages"], name
            assert set(doc.metadata["pages"]) <= {0, 1, 2}


def test_a_truncated_window_keeps_only_the_pages_it_still_holds(synthetic):
    _, data, corpus, _ = synthetic
    pipeline = LibraryConfiguration(corpus, CONFIGURATIONS["neighbours"][1], budget=90)
    result = pipeline.retrieve(data.questions[1].question, doc_name="ACME_2023_10K")
    cut = [d for d in result.context if d.metadata.get("truncated") and len(d.metadata["chunk_indices"]) > 1]
    assert cut
    for doc in cut:
        held = [c for c in corpus.by_document["ACME_2023_10K"] if c.metadata["chunk_index"] in
                doc.metadata["chunk_indices"] and c.page_content[:80] in doc.page_content]
        assert doc.metadata["pages"] == list(dict.fromkeys(c.metadata["page"] for c in held))


def test_run_financebench_writes_results_and_reuses_the_embedding_cache(synthetic, tmp_path):
    data_dir, _, _, root = synthetic
    emb = DeterministicFakeEmbedding(size=32)
    report, paths = run_financebench(data_dir=data_dir, cache_dir=root / "cache", out_dir=tmp_path / "out",
                                     configs=["bm25", "dense", "full"], budget=200, chunk_size=300,
                                     embeddings=emb, chart=False)
    assert sorted(p.name for p in paths) == ["financebench.json", "financebench.md"]
    saved = json.loads(paths[1].read_text(encoding="utf-8"))
    assert set(saved["results"]) == {"single", "shared"}
    assert set(saved["results"]["single"]) == {"bm25", "dense", "full"}
    assert saved["meta"]["pipeline"] == "rag.retrieve" and saved["meta"]["token_counter"] == "chars/4"
    assert report.meta["chunks"] > 0
    assert (root / "cache" / "embeddings.sqlite").exists()


def test_unknown_configuration_lists_the_valid_ones(synthetic):
    data_dir, _, _, root = synthetic
    with pytest.raises(ConfigError, match="valid: bm25, dense"):
        run_financebench(data_dir=data_dir, cache_dir=root / "cache", out_dir=None, configs=["magic"])


def test_cli_lists_configurations(capsys):
    assert cli_main(["eval", "financebench", "--list-configs"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in CONFIGURATIONS)


def test_cli_reports_a_missing_data_directory(tmp_path, capsys):
    code = cli_main(["eval", "financebench", "--data", str(tmp_path / "missing"), "--out", str(tmp_path)])
    assert code == 2
    assert "RAG_FINANCEBENCH_DIR" in capsys.readouterr().err


def test_cli_rejects_a_non_positive_budget(tmp_path, capsys):
    assert cli_main(["eval", "financebench", "--budget", "0", "--data", str(tmp_path)]) == 2
    assert "--budget must be a positive integer" in capsys.readouterr().err


def test_the_store_holds_the_text_and_the_autocontext_vector_of_every_chunk(synthetic):
    _, _, corpus, _ = synthetic
    chunk = corpus.chunks[0]
    text = AutoContext().embedding_texts([chunk])[0]
    assert text.startswith(chunk.metadata["title"]) and text.endswith(chunk.page_content)
    assert not chunk.page_content.startswith(chunk.metadata["title"])
    emb = corpus.embeddings
    plain = corpus.store.with_weights({TEXT_VIEW: 1.0}).search_by_vector(emb.embed_query(chunk.page_content), k=1)
    context = corpus.store.with_weights({CONTEXT_VIEW: 1.0}).search_by_vector(emb.embed_query(text), k=1)
    assert plain[0][0].id == context[0][0].id == chunk.id
    assert plain[0][1] == pytest.approx(1.0, abs=1e-5) and context[0][1] == pytest.approx(1.0, abs=1e-5)
    assert not np.isclose(corpus.store.with_weights({TEXT_VIEW: 1.0}).search_by_vector(
        emb.embed_query(text), k=1, filter={"doc_name": chunk.metadata["doc_name"],
                                              "chunk_index": chunk.metadata["chunk_index"]})[0][1], 1.0)


def test_chunk_pages_files_a_statement_page_under_its_title():
    pages = ["Report of Independent Auditors\nWe have audited the statements.",
             "Table of Contents\nConsolidated Balance Sheet\n(Dollars in millions) 2022 2021\nAssets\n"
             + "Cash and cash equivalents $ 3,655 $ 4,564\n" * 40]
    chunks = chunk_pages(pages, metadata={"doc_name": "D"}, chunk_size=500)
    assert chunks[0].metadata["section"] == "Report of Independent Auditors"
    assert chunks[1].metadata["section"] == "Consolidated Balance Sheet"
    assert chunks[-1].metadata["section"] == "Assets"
