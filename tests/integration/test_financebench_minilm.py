"""The FinanceBench harness end to end with the real MiniLM model, on the synthetic data set."""

from __future__ import annotations

import pytest

from rag.cli import main as cli_main
from rag.testing.financebench import write_synthetic_financebench

pytestmark = pytest.mark.integration


def test_rag_eval_financebench_runs_offline_and_routing_finds_the_filings(tmp_path, capsys):
    data = write_synthetic_financebench(tmp_path / "data")
    code = cli_main(["eval", "financebench", "--data", str(data), "--cache-dir", str(tmp_path / "cache"),
                     "--out", str(tmp_path / "out"), "--configs", "dense,full", "--budget", "200",
                     "--chunk-size", "300", "--no-chart"])
    assert code == 0
    table = (tmp_path / "out" / "financebench.md").read_text(encoding="utf-8")
    full_row = next(line for line in table.splitlines() if line.startswith("| full |"))
    cells = [c.strip() for c in full_row.strip("|").split("|")]
    # every synthetic question names its company and year: routing puts the right filing in context
    assert cells[1] == "100.0%" and cells[6] == "100.0%"
    assert (tmp_path / "cache" / "embeddings.sqlite").exists()
