"""The `rag` command line, run in-process on real files and a persistent Chroma store."""

from __future__ import annotations

import json

import pytest

from rag import cli


@pytest.fixture
def corpus(tmp_path):
    root = tmp_path / "corpus"
    root.mkdir()
    (root / "rates.md").write_text("# Rates\n\nThe central bank raised interest rates to 4% in 2025.\n")
    (root / "stocks.txt").write_text("The stock market reached a record high in 2024.")
    return root


@pytest.mark.integration
def test_index_then_ask_prints_answer_and_sources(corpus, tmp_path, capsys):
    store = str(tmp_path / "store")
    assert cli.main(["index", str(corpus), "--store", store]) == 0
    assert cli.main(["ask", "What did the central bank do to interest rates?", "--store", store]) == 0
    out = capsys.readouterr().out
    assert "raised interest rates to 4% in 2025. [1]" in out
    assert "Sources cited:\n  [1] rates.md" in out   # the cited source first, the others after it
    assert out.index("Sources cited:") < out.index("Retrieved, not used:\n  [2] stocks.txt")


@pytest.mark.integration
def test_ask_json_with_filter(corpus, tmp_path, capsys):
    store = str(tmp_path / "store")
    cli.main(["index", str(corpus), "--store", store])
    capsys.readouterr()
    assert cli.main(["ask", "record high", "--store", store, "--json", "--filter",
                     json.dumps({"title": "stocks"})]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert set(payload) >= {"question", "answer", "context"}
    assert [c["metadata"]["title"] for c in payload["context"]] == ["stocks"]


def test_missing_store_is_one_clear_line(tmp_path, capsys):
    assert cli.main(["ask", "q", "--store", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no store at" in err and "rag index" in err


def test_bad_json_filter_is_one_clear_line(tmp_path, capsys):
    (tmp_path / "s").mkdir()
    assert cli.main(["ask", "q", "--store", str(tmp_path / "s"), "--filter", "{bad"]) == 2
    assert "--filter is not valid JSON" in capsys.readouterr().err


def test_invalid_filter_operator_is_reported(tmp_path, capsys):
    (tmp_path / "s").mkdir()
    assert cli.main(["ask", "q", "--store", str(tmp_path / "s"), "--filter", '{"a": {"$gtt": 1}}']) == 2
    assert "$gtt" in capsys.readouterr().err


def test_empty_directory_is_one_clear_line(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert cli.main(["index", str(tmp_path / "empty"), "--store", str(tmp_path / "s")]) == 2
    assert "no readable documents" in capsys.readouterr().err


def test_unknown_collection_lists_available(corpus, tmp_path, capsys, fake_embedding, monkeypatch):
    from rag.compose.resource import Resource

    Resource.from_texts("docs", ["x"], embedding=fake_embedding, persist_directory=tmp_path / "s")
    assert cli.main(["ask", "q", "--store", str(tmp_path / "s"), "--collection", "other"]) == 2
    assert "available: docs" in capsys.readouterr().err


def test_index_on_a_device_that_is_not_here_is_one_clear_line(corpus, tmp_path, capsys, monkeypatch):
    from rag.models.devices import cuda_unavailable_reason

    if cuda_unavailable_reason() is None:
        pytest.skip("this machine has CUDA")
    monkeypatch.setenv("RAG_EMBEDDING_DEVICE", "cuda")
    assert cli.main(["index", str(corpus), "--store", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert "RAG_EMBEDDING_DEVICE=cuda pins the embedding model to cuda, but" in err and "valid here: auto, cpu" in err
    assert cli.main(["index", str(corpus), "--store", str(tmp_path / "s"), "--device", "mps"]) == 2
    assert "device='mps' pins the embedding model to mps" in capsys.readouterr().err


@pytest.mark.integration
def test_index_reports_chunks_per_second_and_the_device(corpus, tmp_path, capsys):
    assert cli.main(["index", str(corpus), "--store", str(tmp_path / "s"), "--device", "cpu",
                     "--precision", "fp32"]) == 0
    assert " chunks/s on cpu fp32 (numpy)" in capsys.readouterr().err
