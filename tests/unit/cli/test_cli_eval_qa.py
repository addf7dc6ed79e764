"""`rag eval qa` (issue 22): its extra is checked before any work, questions read like a person's,
the pipeline is the one `rag ask` runs, and the report goes where `.gitignore` expects it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rag import cli
from rag.evaluation.qa_evals import load_qa_evals

ROOT = Path(__file__).resolve().parents[3]

# matplotlib hidden from this process only: the import system finds no such package
_WITHOUT_MATPLOTLIB = """
import sys
class Hide:
    def find_spec(self, name, path=None, target=None):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Hide())
from rag.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_missing_extra_is_reported_before_the_store_is_opened(tmp_path):
    # the store does not exist: a check made after opening it would report that instead
    run = subprocess.run([sys.executable, "-c", _WITHOUT_MATPLOTLIB, "eval", "qa", "--store", str(tmp_path / "none")],
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=tmp_path)
    assert run.returncode == 2 and run.stderr.count("\n") == 1, run.stderr
    assert "'matplotlib'" in run.stderr and "pip install -e '.[eval]'" in run.stderr
    assert "rag-runnables[" not in run.stderr   # not a distribution on PyPI


@pytest.fixture
def store(tmp_path) -> str:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "budget.md").write_text("# Budget\n\nThe context budget holds 4,000 tokens by default.\n\n"
                                      "## Stores\n\nChroma is the default vector store of a knowledge base.\n")
    (corpus / "rates.md").write_text("# Rates\n\nThe central bank raised interest rates in 2025 to fight inflation.\n")
    path = str(tmp_path / "store")
    assert cli.main(["index", str(corpus), "--store", path, "--embedding", "fake"]) == 0
    return path


def test_questions_read_like_a_person_and_the_report_is_ignored_by_git(tmp_path, store, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)   # the default --out, as a user of this checkout runs it
    out = Path("eval-report") / f"test-{os.getpid()}"
    try:
        assert cli.main(["eval", "qa", "--store", store, "--n", "5", "--k", "3", "--lexical-support",
                         "--out", str(out)]) == 0
        evals = load_qa_evals(out / "evals.jsonl")
        assert {e.question: e.answer for e in evals} == {
            "The context budget holds how many tokens by default?": "4,000",
            "The central bank raised interest rates in which year to fight inflation?": "2025",
            "What is the default vector store of a knowledge base?": "Chroma",
        }
        for item in evals:
            assert item.question.endswith("?") and item.answer not in item.question
        ignored = subprocess.run(["git", "check-ignore", "-q", str(out / "report.md")], cwd=ROOT)
        assert ignored.returncode == 0, "eval-report/ is not in .gitignore"
    finally:
        import shutil

        shutil.rmtree(ROOT / out, ignore_errors=True)


def test_eval_qa_runs_the_pipeline_rag_ask_runs(store, capsys, tmp_path):
    """The context an evaluated question got is the context `rag ask --json` gives for it."""
    out = tmp_path / "report"
    assert cli.main(["eval", "qa", "--store", store, "--n", "1", "--k", "2", "--lexical-support",
                     "--out", str(out)]) == 0
    (item,) = load_qa_evals(out / "evals.jsonl")
    capsys.readouterr()
    assert cli.main(["ask", item.question, "--store", store, "--k", "2", "--json"]) == 0
    asked = [d["page_content"] for d in json.loads(capsys.readouterr().out)["context"]]
    report = (out / "report.md").read_text()
    assert item.id in report
    from rag.compose.airag import airag

    args = cli.build_parser().parse_args(["ask", item.question, "--store", store])
    result = airag(cli.store_rag(args), item.question, return_all=True, search_kwargs={"k": 2}, embedding=None)
    assert [d.page_content for d in result.context] == asked
