"""FinanceBench pipelines on the synthetic data set: every configuration runs, within budget, cached."""

from __future__ import annotations

import json

import numpy as np
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag.base.errors import ConfigError
from rag.cli import main as cli_main
from rag.evaluation.financebench import FinanceBenchData, chunk_pages
from rag.evaluation.financebench_index import BenchIndex, autocontext_texts
from rag.evaluation.financebench_pipelines import (
    CONFIGURATIONS,
    Pipeline,
    run_financebench,
)
from rag.evaluation.financebench_query import sub_queries
from rag.evaluation.financebench_run import document_pages, estimate_tokens
from rag.testing.financebench import write_synthetic_financebench


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    root = tmp_path_factory.mktemp("fb")
    data_dir = write_synthetic_financebench(root / "data")
    data = FinanceBenchData.load(data_dir)
    index = BenchIndex.build(data, cache_dir=root / "cache", chunk_size=300,
                             embeddings=DeterministicFakeEmbedding(size=32))
    return data_dir, data, index, root


def test_every_configuration_returns_a_context_within_the_budget(synthetic):
    _, data, index, _ = synthetic
    for name, (_, spec) in CONFIGURATIONS.items():
        pipeline = Pipeline(index, spec, budget=150)
        for doc_name in ("ACME_2022_10K", None):
            result = pipeline.retrieve(data.questions[0].question, doc_name=doc_name)
            tokens = sum(estimate_tokens(d.page_content) for d in result.context)
            assert 0 < tokens <= 150, name
            assert result.ranked, name
            if doc_name is not None:
                assert {d.metadata["doc_name"] for d in result.context} == {doc_name}, name


def test_bm25_finds_the_evidence_page_of_a_keyword_question(synthetic):
    _, _, index, _ = synthetic
    bm25 = Pipeline(index, CONFIGURATIONS["bm25"][1], budget=80)
    result = bm25.retrieve("patent lawsuit guidance systems", doc_name="ACME_2022_10K")
    assert document_pages(result.context[0]) == {("ACME_2022_10K", 3)}


def test_routing_searches_only_the_named_company_and_year(synthetic):
    _, _, index, _ = synthetic
    routed = Pipeline(index, CONFIGURATIONS["routing"][1], budget=4000)
    result = routed.retrieve("Did Globex Foods raise its dividend in 2023?", doc_name=None)
    assert {d.metadata["doc_name"] for d in result.context} == {"GLOBEX_2023_10K"}
    result = routed.retrieve("What were Acme Rockets' net sales in FY2022?", doc_name=None)
    assert {d.metadata["doc_name"] for d in result.context} == {"ACME_2022_10K"}


def test_neighbour_and_segment_contexts_list_every_page_they_cover(synthetic):
    _, data, index, _ = synthetic
    for name in ("neighbours", "rse"):
        result = Pipeline(index, CONFIGURATIONS[name][1], budget=400).retrieve(
            data.questions[1].question, doc_name="ACME_2023_10K")
        for doc in result.context:
            assert doc.metadata["pages"], name
            assert set(doc.metadata["pages"]) <= {0, 1, 2}


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


# ---------------------------------------------------------------------------- query analysis
def test_sub_queries_keeps_the_question_first_and_drops_short_instructions():
    parts = sub_queries("What is the FY2018 DPO for Walmart? DPO is 365 times average payables over COGS. "
                        "Answer in days.")
    assert parts[0].startswith("What is the FY2018 DPO")
    assert "DPO is 365 times average payables over COGS." in parts
    assert "Answer in days." not in parts


def test_autocontext_vectors_embed_the_header_but_the_chunk_text_stays_the_chunk(synthetic):
    _, _, index, _ = synthetic
    chunk = index.chunks[0]
    text = autocontext_texts([chunk])[0]
    assert text.startswith(chunk.metadata["title"]) and text.endswith(chunk.page_content)
    assert not chunk.page_content.startswith(chunk.metadata["title"])
    assert index.context_vectors.shape == index.vectors.shape
    assert not np.allclose(index.context_vectors[0], index.vectors[0])


def test_chunk_pages_files_a_statement_page_under_its_title():
    pages = ["Report of Independent Auditors\nWe have audited the statements.",
             "Table of Contents\nConsolidated Balance Sheet\n(Dollars in millions) 2022 2021\nAssets\n"
             + "Cash and cash equivalents $ 3,655 $ 4,564\n" * 40]
    chunks = chunk_pages(pages, metadata={"doc_name": "D"}, chunk_size=500)
    assert chunks[0].metadata["section"] == "Report of Independent Auditors"
    assert chunks[1].metadata["section"] == "Consolidated Balance Sheet"
    assert chunks[-1].metadata["section"] == "Assets"
