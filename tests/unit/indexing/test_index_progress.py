"""`rag index` progress (issue 22): lines when piped, one readable line in a terminal, the right units."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

from rag.indexing.progress import IndexProgress, lines
from rag.testing.financebench import write_pdf

ROOT = Path(__file__).resolve().parents[3]


def _corpus(root: Path, *, pdf: bool) -> Path:
    corpus = root / "corpus"
    corpus.mkdir()
    for i in range(3):
        (corpus / f"note{i}.md").write_text(f"# Note {i}\n\nThe note number {i} says something about rates.\n")
    if pdf:
        write_pdf(corpus / "report.pdf", ["Page one text about revenue.", "Page two text about costs."])
    return corpus


def _index(tmp_path: Path, corpus: Path) -> str:
    run = subprocess.run([sys.executable, "-m", "rag.cli", "index", str(corpus), "--store", str(tmp_path / "s"),
                          "--embedding", "fake"], capture_output=True, text=True, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert run.returncode == 0, run.stderr
    return run.stderr


def test_piped_output_gets_plain_progress_lines_with_the_right_units(tmp_path):
    err = _index(tmp_path, _corpus(tmp_path, pdf=False))
    progress = [line for line in err.splitlines() if line.startswith("indexing: ")]
    assert progress[0].startswith("indexing: 1/3 files, ") and progress[-1].startswith("indexing: 3/3 files, ")
    assert "\x1b[" not in err and "\r" not in err                 # no terminal control codes in a pipe
    assert not any("page" in line for line in progress)          # Markdown files have no pages
    assert "3 embedded" in progress[-1] and "elapsed" in progress[-1]


def test_pdf_pages_are_counted_as_pages(tmp_path):
    err = _index(tmp_path, _corpus(tmp_path, pdf=True))
    assert "4/4 files, 2 pages, " in err


def test_the_terminal_line_fits_an_80_column_terminal_without_cutting():
    from rich.console import Console

    from rag.indexing.index_command import _with_progress

    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=80, color_system=None)

    def run(on_event):
        for event, n in [("files_total", 1700), ("file", 17), ("pages", 120), ("chunks", 2400), ("embeddings", 2048)]:
            on_event(event, n)
        return "report"

    assert _with_progress(console, run) == "report"
    final = out.getvalue().rsplit("\r", 1)[-1].replace("\x1b[2K", "")
    assert "17/1,700 files, 120 pages, 2,400 chunks, 2,048 embedded (" in final and "left" in final
    assert "…" not in final


def test_rates_below_one_per_second_are_not_shown_as_zero():
    now = [0.0]
    progress = IndexProgress(clock=lambda: now[0])
    progress.update("embeddings", 3)
    now[0] = 10.0
    assert "(0.3/s)" in progress.line()


def test_piped_lines_come_every_few_seconds_not_per_event():
    now, out = [0.0], io.StringIO()
    on_event = lines(IndexProgress(clock=lambda: now[0]), out, every=5)
    on_event("files_total", 1000)
    for second in range(60):
        now[0] = float(second)
        for _ in range(10):
            on_event("file", 1)
            on_event("chunks", 4)
    assert 10 <= len(out.getvalue().splitlines()) <= 13
