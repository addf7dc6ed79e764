"""`make demo` ends by printing the next commands, with the path that works from a fresh clone (issue 22).

After `make demo`, `rag` was not on the PATH (`rag: command not found`): the commands it prints
name `.venv/bin/rag` (the venv is given here as the test's own), and each one must run.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rag import cli

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def _printed_commands(*make_args: str) -> list[str]:
    out = subprocess.run(["make", "-s", "--no-print-directory", "-C", str(ROOT), *make_args],
                         capture_output=True, text=True, check=True).stdout
    return [line.strip() for line in out.splitlines() if line.startswith("  ")]


def test_demo_ends_with_the_next_commands(tmp_path):
    venv = Path(sys.executable).parent.parent
    # `make -n` prints the recipe without running it: after the question, demo prints the next commands
    recipe = subprocess.run(["make", "-s", "--no-print-directory", "-n", "-C", str(ROOT), "demo", f"VENV={venv}",
                             f"DEMO_STORE={tmp_path / 'demo-store'}"], capture_output=True, text=True, check=True)
    lines = recipe.stdout.splitlines()
    asked = max(i for i, line in enumerate(lines) if line.startswith(f"{venv}/bin/rag ask "))
    assert any("demo-next" in line for line in lines[asked + 1:]), lines
    printed = _printed_commands("demo-next", f"VENV={venv}", f"DEMO_STORE={tmp_path / 'demo-store'}")
    assert printed and all(line.startswith(f"{venv}/bin/rag ") for line in printed), printed


def test_every_printed_command_runs(tmp_path):
    corpus = tmp_path / "docs"
    corpus.mkdir()
    (corpus / "filters.md").write_text("# Filters\n\nFilter by year with {\"year\": {\"$gt\": 2024}}.\n")
    store = tmp_path / "demo-store"
    assert cli.main(["index", str(corpus), "--store", str(store), "--collection", "docs", "--embedding", "fake"]) == 0
    venv = Path(sys.executable).parent.parent
    commands = _printed_commands("demo-next", f"VENV={venv}", f"DEMO_STORE={store}")
    assert len(commands) >= 2
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for command in commands:
        run = subprocess.run(shlex.split(command), cwd=tmp_path, env=env, capture_output=True, text=True)
        assert run.returncode == 0, (command, run.stderr[-2000:])


def test_demo_answers_its_own_question_with_the_cited_sources_first(tmp_path, capsys):
    """The question `make demo` asks is answered by the sentence that states the answer, and the
    sources it cites are listed first (issue 25). The docs are indexed with the fake embedding to keep
    the test fast (retrieval is then BM25 plus a fake dense search); the answerer is the default one."""
    venv = Path(sys.executable).parent.parent
    recipe = subprocess.run(["make", "-s", "--no-print-directory", "-n", "-C", str(ROOT), "demo", f"VENV={venv}"],
                            capture_output=True, text=True, check=True).stdout
    question = next(shlex.split(line)[2] for line in recipe.splitlines() if line.startswith(f"{venv}/bin/rag ask "))
    store = str(tmp_path / "demo-store")
    assert cli.main(["index", str(ROOT / "docs"), "--store", store, "--collection", "docs", "--embedding", "fake"]) == 0
    capsys.readouterr()
    assert cli.main(["ask", question, "--store", store, "--collection", "docs"]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().splitlines()[-1].startswith("Answered by ")   # which model answered, in one line
    if out.startswith("I'm not sure"):   # the fallback below its threshold: the closest passage, with its source
        shown = re.search(r"^Closest passage \[(\d+)\] (\S+):$", out, re.M)
        assert shown and f"[{shown.group(1)}] {shown.group(2)}" in out.partition("Retrieved (none cited):")[2], out
        return
    answer, _, sources = out.partition("Sources cited:")
    assert "all-MiniLM-L6-v2" in answer.split(". ")[0], answer   # the first sentence states the default model
    cited, _, unused = sources.partition("Retrieved, not used:")
    assert re.findall(r"\[\d+\] \S+", cited) and "models.md" in cited.splitlines()[1], out
    assert all(f"[{n}]" in cited for n in re.findall(r"\[(\d+)\]", answer)), out   # every cited source is listed first
