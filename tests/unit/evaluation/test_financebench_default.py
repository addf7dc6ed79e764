"""The FinanceBench row `default` is `rag index` + `rag ask`: the same store, the same context."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rag.cli import main as cli_main
from rag.evaluation.financebench import DATA_ENV_VAR, FinanceBenchData
from rag.evaluation.financebench_default import DefaultConfiguration
from rag.evaluation.financebench_pipelines import run_financebench
from rag.evaluation.financebench_run import estimate_tokens
from rag.testing.financebench import write_synthetic_financebench

ROOT = Path(__file__).resolve().parents[3]
FILING = Path(os.environ.get(DATA_ENV_VAR) or ROOT.parent / "shared" / "data" / "financebench") / "pdfs" / "3M_2022_10K.pdf"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("fbdefault")
    data = FinanceBenchData.load(write_synthetic_financebench(root / "data"))
    config = DefaultConfiguration.build(data, cache_dir=root / "cache", budget=300, token_counter="auto")
    return root, data, config


def _ask(store, question: str, *extra: str, capsys) -> list[tuple[str, str]]:
    capsys.readouterr()
    assert cli_main(["ask", question, "--json", "--max-tokens", "300", "--store", str(store),
                     "--collection", "financebench", *extra]) == 0
    out = json.loads(capsys.readouterr().out)
    return [(d["metadata"]["source"], d["page_content"]) for d in out["context"]]


def test_the_default_row_retrieves_exactly_what_rag_ask_returns(built, capsys):
    root, data, config = built
    store = root / "cache" / "default-kb"
    for question in data.questions[:3]:
        got = config.retrieve(question.question, doc_name=None)
        assert [(d.metadata["source"], d.page_content) for d in got.context] == _ask(store, question.question,
                                                                                     capsys=capsys)
        one = config.retrieve(question.question, doc_name=question.doc_name)
        flt = json.dumps(config.settings(question.doc_name)["filter"])
        assert [(d.metadata["source"], d.page_content) for d in one.context] == _ask(
            store, question.question, "--filter", flt, capsys=capsys)
        assert {d.metadata["doc_name"] for d in one.context} == {question.doc_name}


def test_the_default_row_is_indexed_once_and_scored_with_the_tables_counter(built, tmp_path):
    root, data, _ = built
    again = DefaultConfiguration.build(data, cache_dir=root / "cache", budget=300)
    assert again.index_stats["index_changed"] is False      # the cached knowledge base is up to date
    assert again.index_stats["chunks"] > 0
    result = again.retrieve(data.questions[0].question, doc_name=None)
    assert 0 < sum(estimate_tokens(d.page_content) for d in result.context) <= 300
    report, _ = run_financebench(data_dir=data.root, cache_dir=root / "cache", out_dir=None, configs=["default"],
                                 budget=300)
    assert set(report.results["single"]) == {"default"}
    assert report.meta["default_index"]["chunks"] == again.index_stats["chunks"]
    assert report.results["single"]["default"]["context_hit"] > 0


def test_the_no_tables_row_reads_the_same_filings_as_plain_text(tmp_path):
    if not FILING.exists():
        pytest.skip(f"FinanceBench filings not found at {FILING.parent} (set {DATA_ENV_VAR})")
    import pypdfium2 as pdfium

    root = write_synthetic_financebench(tmp_path / "data")
    subset = pdfium.PdfDocument.new()
    subset.import_pages(pdfium.PdfDocument(str(FILING)), [47])       # 3M's income statement: a ruled table
    subset.save(str(root / "pdfs" / "MMM_2022_10K.pdf"))
    data = FinanceBenchData.load(root)
    with_tables = DefaultConfiguration.build(data, cache_dir=tmp_path / "cache", budget=300)
    plain = DefaultConfiguration.build(data, cache_dir=tmp_path / "cache", budget=300, tables=False)
    assert (with_tables.name, plain.name) == ("default", "default-notables")
    assert with_tables.index_stats["table_chunks"] > 0
    assert plain.index_stats["table_chunks"] == 0
    assert plain.index_stats["chunks"] > 0
    again = DefaultConfiguration.build(data, cache_dir=tmp_path / "cache", budget=300, tables=False)
    assert again.index_stats["index_changed"] is False      # filings already in are not loaded again
