"""`rag ask` never creates a store; `rag index` skips symlinks out of the folder unless told (issue 13)."""

from __future__ import annotations

import pytest

from rag import cli


@pytest.mark.parametrize("make", ["missing", "empty_dir", "other_files"])
def test_asking_a_store_that_does_not_exist_is_one_line_and_creates_nothing(tmp_path, capsys, make):
    store = tmp_path / "store"
    if make != "missing":
        store.mkdir()
    if make == "other_files":
        (store / "notes.txt").write_text("not a store")
    before = sorted(p.name for p in store.iterdir()) if store.exists() else None
    assert cli.main(["ask", "anything?", "--store", str(store)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no store at" in err and "rag index" in err
    assert (sorted(p.name for p in store.iterdir()) if store.exists() else None) == before


def test_asking_a_knowledge_base_with_a_typo_lists_the_existing_ones(tmp_path, capsys):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.md").write_text("# A\n\nParis is the capital of France.")
    store = str(tmp_path / "store")
    assert cli.main(["index", str(corpus), "--store", store, "--embedding", "fake"]) == 0
    capsys.readouterr()
    assert cli.main(["ask", "capital?", "--store", store, "--collection", "dcos"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'dcos'" in err and "docs" in err
    assert not (tmp_path / "store" / "kb" / "dcos").exists()


def test_index_skips_links_out_of_the_folder_unless_follow_symlinks(tmp_path, capsys):
    corpus, outside = tmp_path / "corpus", tmp_path / "outside"
    corpus.mkdir()
    outside.mkdir()
    (corpus / "own.md").write_text("# Own\n\nOur own text.")
    (outside / "secret.md").write_text("# Secret\n\nSecret text.")
    (corpus / "link.md").symlink_to(outside / "secret.md")
    store = str(tmp_path / "store")
    assert cli.main(["index", str(corpus), "--store", store, "--embedding", "fake"]) == 0
    err = capsys.readouterr().err
    assert "skipped" in err and "link.md" in err and "--follow-symlinks" in err and "added 1," in err
    assert cli.main(["index", str(corpus), "--store", store, "--embedding", "fake", "--follow-symlinks"]) == 0
    assert "added 1," in capsys.readouterr().err  # now the link's target too
