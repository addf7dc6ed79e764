"""Every notebook in notebooks/ runs top to bottom, offline, and is committed with its outputs.

The docs site renders the committed outputs (mkdocs-jupyter, `execute: false`); `make notebooks`
re-runs them in place.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.mark.integration
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs_offline(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # The kernel must import this checkout's `rag`, installed or not.
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_is_committed_with_its_outputs(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    not_run = [i for i, c in enumerate(code) if c.get("execution_count") is None]
    assert not not_run, f"{path.name}: code cells {not_run} were not run; run `make notebooks` and commit the outputs"
    assert any(c.get("outputs") for c in code)
    errors = [o for c in code for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors, f"{path.name} is committed with an error output"


def test_no_retrieval_notebook_searches_with_fake_embeddings() -> None:
    """Search results shown to the reader come from the real model (all-MiniLM-L6-v2)."""
    def source(path: Path) -> str:
        return "\n".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code")

    fake = [p.name for p in NOTEBOOKS if "FakeEmbedding" in source(p) or '"deterministic"' in source(p)]
    assert not fake


def test_there_is_a_quickstart_notebook() -> None:
    assert any(p.name == "quickstart.ipynb" for p in NOTEBOOKS)
