"""`rag index` reads a new file type from an installed plugin, without a change to the library.

The plugin is what `pip install` leaves behind: a module and a `.dist-info` folder whose
`entry_points.txt` declares `[rag.loaders] .xyz = ...` (and a chunker for the "xyz" type), on the
interpreter's path. The real `rag` console script runs in a new process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rag import KnowledgeBase

RAG = Path(sys.executable).parent / "rag"

_PLUGIN = '''
from langchain_core.documents import Document


def load_xyz(path, *, limits, notes):
    """An .xyz file is 'key: value' lines; each record becomes one document."""
    records = [line.split(":", 1) for line in path.read_text().splitlines() if ":" in line]
    notes.append(f"{len(records)} record(s)")
    return [Document(page_content=f"{key.strip()} is {value.strip()}", metadata={"record": n})
            for n, (key, value) in enumerate(records)]


class RecordChunker:
    """One chunk per record, numbered per document."""

    def settings(self):
        return {"type": "xyz-records"}

    def split_documents(self, docs):
        return [Document(page_content=d.page_content, metadata={**d.metadata, "chunk_index": d.metadata["record"]})
                for d in docs]
'''


def _install(site: Path, entry_points: str, module: str = _PLUGIN) -> None:
    """What `pip install xyz-rag` writes: the module and its distribution's metadata."""
    (site / "xyz_rag.py").write_text(module)
    info = site / "xyz_rag-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: xyz-rag\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points)


def _rag(site: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path, "ANONYMIZED_TELEMETRY": "False"}
    return subprocess.run([str(RAG), *argv], capture_output=True, text=True, env=env, check=False, timeout=300)


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    root.mkdir()
    (root / "capitals.xyz").write_text("France: Paris\nItaly: Rome\nnot a record\nSpain: Madrid\n")
    (root / "notes.md").write_text("# Notes\n\nMarkdown is still read by the built-in loader.\n")
    return root


@pytest.mark.skipif(not RAG.exists(), reason="the rag console script is not installed in this environment")
def test_rag_index_reads_a_suffix_an_installed_plugin_registers(tmp_path: Path, corpus: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    _install(site, "[rag.loaders]\n.xyz = xyz_rag:load_xyz\n\n[rag.chunkers]\nxyz = xyz_rag:RecordChunker\n")
    run = _rag(site, "index", str(corpus), "--store", str(tmp_path / "store"), "--collection", "plug",
               "--embedding", "fake", "--no-autocontext")
    assert run.returncode == 0, run.stderr
    assert "3 record(s)" in run.stderr  # the loader's note, printed with the file
    kb = KnowledgeBase("plug", tmp_path / "store")
    records = {Path(r.source).name: r for r in kb.list_documents()}
    assert set(records) == {"capitals.xyz", "notes.md"}
    chunks = kb.get_documents(filter={"file_type": "xyz"})
    assert sorted(c.page_content for c in chunks) == ["France is Paris", "Italy is Rome", "Spain is Madrid"]
    assert sorted(c.metadata["chunk_index"] for c in chunks) == [0, 1, 2]   # the plugin's chunker numbered them
    assert {c.metadata["title"] for c in chunks} == {"capitals"}            # filled in for the plugin


@pytest.mark.skipif(not RAG.exists(), reason="the rag console script is not installed in this environment")
def test_a_plugin_that_cannot_be_imported_is_named_in_a_one_line_error(tmp_path: Path, corpus: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    _install(site, "[rag.loaders]\nxyz = xyz_rag:load_xyz\n", module="raise RuntimeError('broken plugin')\n")
    run = _rag(site, "index", str(corpus), "--store", str(tmp_path / "store"), "--embedding", "fake")
    assert run.returncode != 0
    assert "rag.loaders entry point xyz = xyz_rag:load_xyz of xyz-rag cannot be loaded" in run.stderr
    assert "broken plugin" in run.stderr and "Traceback" not in run.stderr
