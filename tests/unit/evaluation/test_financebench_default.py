"""The FinanceBench row `default` is `rag index` + `rag ask`: the same store, the same context."""

from __future__ import annotations

import json

import pytest

from rag.cli import main as cli_main
from rag.evaluation.financebench import FinanceBenchData
from rag.evaluation.financebench_default import DefaultConfiguration
from rag.evaluation.financebench_pipelines import run_financebench
from rag.evaluation.financebench_run import estimate_tokens
from rag.testing.financebench import write_synthetic_financebench


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
