"""`rag serve`: argument errors are one line, and a real process serves a config on loopback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from rag.cli import main
from rag.testing.chroma_server import free_port

ROOT = Path(__file__).resolve().parents[3]


def test_missing_config_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["serve", "--config", str(tmp_path / "absent.yaml")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("rag serve: error: no config file at")


def test_invalid_config_names_the_bad_key(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text("resources:\n  - {name: d, kind: chroma, colection: x}\n")
    assert main(["serve", "--config", str(path)]) == 2
    assert "unknown key 'colection'; valid: " in capsys.readouterr().err


def test_serve_process_answers_over_http(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nThe serve command starts an HTTP server for the knowledge base.\n")
    config = tmp_path / "serve.yaml"
    config.write_text(
        "embedding: {kind: deterministic, size: 16}\n"
        "llm: {kind: extractive, semantic: false}\n"
        "resources:\n"
        f"  - {{name: docs, kind: chroma, path: {tmp_path / 'store'}, index: {{paths: [{docs}]}}}}\n"
    )
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("RAG_API_TOKEN", None)
    proc = subprocess.Popen([sys.executable, "-m", "rag.cli", "serve", "--config", str(config), "--port", str(port),
                             "--log-level", "warning"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(base + "/health", timeout=1) as r:
                    assert json.load(r)["status"] == "ok"
                break
            except (urllib.error.URLError, ConnectionError):
                assert proc.poll() is None, proc.stderr.read().decode()
                assert time.monotonic() < deadline, "rag serve did not start"
                time.sleep(0.2)
        request = urllib.request.Request(base + "/invoke", data=json.dumps({"question": "What does serve start?"}).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as r:
            body = json.load(r)
        assert "HTTP server" in body["answer"] and body["sources"][0]["label"] == "a.md"
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_serve_store_and_config_together_or_a_missing_store_are_one_line_errors(tmp_path, capsys):
    assert main(["serve", "--config", str(tmp_path / "a.yaml"), "--store", str(tmp_path / "s")]) == 2
    assert capsys.readouterr().err.strip().endswith("give --config FILE or --store DIR, not both")
    assert main(["serve", "--store", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("rag serve: error: no store at") and "rag index PATH --store" in err[-1]
    assert main(["mcp", "--store", str(tmp_path / "missing"), "--collection", "notes"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("rag mcp: error: no store at")
