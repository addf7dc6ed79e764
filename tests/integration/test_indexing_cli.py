"""`rag index` end to end on real files (fake embeddings for speed; the MiniLM path is in tests/unit/cli)."""

from __future__ import annotations

import json

import pytest

from rag import cli
from rag.indexing.locking import WriterLock


@pytest.fixture
def corpus(tmp_path):
    root = tmp_path / "corpus"
    root.mkdir()
    (root / "rates.md").write_text("# Rates\n\nThe central bank raised interest rates to 4% in 2025.\n")
    (root / "stocks.txt").write_text("The stock market reached a record high in 2024.")
    (root / "locked.pdf").write_bytes(b"%PDF-1.4 damaged")
    return root


def _index(corpus, store, *extra: str) -> int:
    return cli.main(["index", str(corpus), "--store", str(store), "--embedding", "fake", *extra])


def test_index_reports_counts_and_skips_then_rerun_is_a_no_op(corpus, tmp_path, capsys):
    store = tmp_path / "store"
    assert _index(corpus, store) == 0
    err = capsys.readouterr().err
    assert "added 2, updated 0, unchanged 0, moved 0, deleted 0, skipped 1" in err
    assert "locked.pdf: cannot open PDF, it is damaged" in err
    assert _index(corpus, store) == 0
    err = capsys.readouterr().err
    assert "added 0, updated 0, unchanged 2" in err and "0 chunk(s) written, 0 removed, 0 embedded" in err


def test_changing_one_file_reindexes_only_it_and_deleting_cleans_up(corpus, tmp_path, capsys):
    store = tmp_path / "store"
    _index(corpus, store)
    (corpus / "stocks.txt").write_text("Bond yields fell in 2024.")
    _index(corpus, store)
    assert "added 0, updated 1, unchanged 1" in capsys.readouterr().err
    (corpus / "rates.md").unlink()
    _index(corpus, store)
    err = capsys.readouterr().err
    assert "deleted 1" in err and "rates.md" in err


def test_cleanup_none_keeps_vanished_files(corpus, tmp_path, capsys):
    store = tmp_path / "store"
    _index(corpus, store)
    (corpus / "rates.md").unlink()
    _index(corpus, store, "--cleanup", "none")
    assert "deleted 0" in capsys.readouterr().err


def test_second_writer_is_one_clear_line(corpus, tmp_path, capsys):
    store = tmp_path / "store"
    _index(corpus, store)
    capsys.readouterr()
    with WriterLock(store):
        (corpus / "new.md").write_text("new text")
        assert _index(corpus, store) == 2
    err = capsys.readouterr().err
    assert "rag index: error:" in err and "is being written by process" in err and "--lock-timeout" in err


def test_manifest_records_the_model_and_autocontext(corpus, tmp_path, capsys):
    store = tmp_path / "store"
    _index(corpus, store, "--collection", "kb")
    manifest = json.loads((store / "kb" / "kb" / "manifest.json").read_text())
    assert manifest["embedding"] == {"id": "DeterministicFakeEmbedding(size=384)", "dimension": 384}
    assert manifest["autocontext"]["enabled"] is True


def test_ask_finds_a_knowledge_base_and_lists_collections(corpus, tmp_path, capsys):
    store = tmp_path / "store"
    _index(corpus, store, "--collection", "kb")
    assert cli.main(["ask", "q", "--store", str(store), "--collection", "other"]) == 2
    assert "no knowledge base 'other'" not in capsys.readouterr().err  # falls back to plain collections
    resource = cli.open_store_resource(str(store), "kb")
    assert resource.name == "kb" and resource.retrieve("interest rates", search_kwargs={"k": 5})
