"""What `rag index` and `rag ask` tell the user about files they did not read and filters that matched nothing."""

from __future__ import annotations

import gzip
import json

import pytest

from rag import cli


@pytest.fixture
def mixed(tmp_path):
    root = tmp_path / "mixed"
    (root / "guides").mkdir(parents=True)
    (root / "rates.md").write_text("# Rates\n\nThe central bank raised interest rates to 4% in 2025.\n")
    (root / "guides" / "setup.rst").write_text(
        "=====\nSetup\n=====\n\nInstall the package first.\n\nUpgrading\n---------\n\nRun pip install -U rag.\n")
    (root / "notes.txt.gz").write_bytes(gzip.compress(b"compressed notes"))
    (root / "data.json").write_text('{"a": 1}')
    return root


def _index(args, store):
    return cli.main(["index", *args, "--store", str(store), "--embedding", "fake"])


def test_index_lists_the_files_it_did_not_read_with_the_reason(mixed, tmp_path, capsys):
    assert _index([str(mixed)], tmp_path / "s") == 0
    err = capsys.readouterr().err
    assert "notes.txt.gz: unsupported file type .gz (compressed files are not opened); supported:" in err
    assert "data.json: unsupported file type .json; supported: .txt, .md, .markdown, .rst" in err
    assert "added 2," in err and "2 file(s) of unsupported type not read" in err


def test_rst_files_are_read_as_text_with_their_titles_as_sections(mixed, tmp_path, capsys):
    assert _index([str(mixed)], tmp_path / "s") == 0
    capsys.readouterr()
    assert cli.main(["ask", "How do I upgrade?", "--store", str(tmp_path / "s"), "--json",
                     "--filter", json.dumps({"file_type": "rst"})]) == 0
    context = json.loads(capsys.readouterr().out)["context"]
    assert {c["metadata"]["title"] for c in context} == {"Setup"}
    assert {c["metadata"]["section"] for c in context} == {"Setup", "Upgrading"}
    assert any("Run pip install -U rag." in c["page_content"] for c in context)


def test_a_directory_of_unsupported_files_is_one_clear_error_naming_their_types(tmp_path, capsys):
    (tmp_path / "only").mkdir()
    (tmp_path / "only" / "a.gz").write_bytes(gzip.compress(b"x"))
    (tmp_path / "only" / "b.csv").write_text("a,b\n1,2\n")
    assert _index([str(tmp_path / "only")], tmp_path / "s") == 2
    err = capsys.readouterr().err
    assert "no readable documents found" in err and "2 file(s) of unsupported type (.csv, .gz)" in err


def test_ask_says_when_the_filter_matched_nothing(mixed, tmp_path, capsys):
    assert _index([str(mixed)], tmp_path / "s") == 0
    capsys.readouterr()
    no_match = json.dumps({"title": "no such title"})
    assert cli.main(["ask", "What about rates?", "--store", str(tmp_path / "s"), "--filter", no_match]) == 0
    captured = capsys.readouterr()
    assert "Sources: none (no chunk in collection 'docs' matches --filter" in captured.out
    assert "\n  [1]" not in captured.out
    assert "matches --filter" in captured.err
    assert cli.main(["ask", "What about rates?", "--store", str(tmp_path / "s"), "--json", "--filter", no_match]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["context"] == [] and "matches --filter" in captured.err


def test_ask_with_a_matching_filter_lists_its_sources(mixed, tmp_path, capsys):
    assert _index([str(mixed)], tmp_path / "s") == 0
    capsys.readouterr()
    assert cli.main(["ask", "rates", "--store", str(tmp_path / "s"), "--filter", json.dumps({"title": "Rates"})]) == 0
    out = capsys.readouterr().out
    assert "Sources cited:\n  [1] rates.md" in out or "Closest passage [1] rates.md:" in out   # asserted, or not sure
