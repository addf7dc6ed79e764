"""The cost limits per file at every door (`LoadLimits`, `add_documents`, the config's `index:` block, `rag index`),
what a changed limit means for an incremental sync, and pdfplumber cut off per page."""

from __future__ import annotations

import logging
import math
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import FakeListChatModel

from rag import RAG, cli
from rag.base.errors import ConfigError
from rag.compose.knowledge_base import KnowledgeBase
from rag.compose.resource import Resource
from rag.config.rag_config import from_config, parse_config
from rag.indexing.limits import LIMIT_NAMES, LoadLimits
from rag.indexing.loaders import load_file
from rag.indexing.page_budget import PageTimeout, Watchdog
from rag.testing.hostile_files import inflating_pdf

_FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
_not_bool = st.one_of(st.text(max_size=8), st.floats(allow_nan=True), st.lists(st.integers(), max_size=2))
_BAD = {
    "tables": st.one_of(st.text(max_size=12).filter(lambda s: s not in ("pdfium", "pdfplumber", "none")),
                        st.integers(), st.floats()),
    "ocr": st.one_of(st.integers(), st.text(max_size=5)),
    "table_max_chars": st.one_of(st.integers(max_value=-1), st.booleans(), _not_bool),
    "table_max_objects": st.one_of(st.integers(max_value=-1), st.booleans(), _not_bool),
    "ocr_max_pages": st.one_of(st.integers(max_value=-1), st.booleans(), _not_bool),
    "ocr_dpi": st.one_of(st.integers(max_value=49), st.integers(min_value=601), st.booleans(), _not_bool),
    "max_bytes": st.one_of(st.integers(max_value=0), st.booleans(), _not_bool),
    "table_seconds": st.one_of(st.floats(max_value=-1e-9), st.just(math.nan), st.just(math.inf), st.booleans(),
                               st.text(max_size=5)),
    "table_page_seconds": st.one_of(st.floats(max_value=-1e-9), st.just(math.nan), st.just(math.inf),
                                    st.booleans(), st.text(max_size=5)),
    "ocr_seconds": st.one_of(st.floats(max_value=-1e-9), st.just(math.nan), st.just(math.inf), st.booleans(),
                             st.text(max_size=5)),
}
_bad_limit = st.sampled_from(sorted(_BAD)).flatmap(lambda name: st.tuples(st.just(name), _BAD[name]))


def test_every_limit_has_a_bad_value_strategy():
    assert set(_BAD) == set(LIMIT_NAMES)


@_FAST
@given(bad=_bad_limit)
def test_a_bad_limit_is_refused_at_every_door_naming_it_and_what_is_valid(tmp_path_factory, bad):
    name, value = bad
    with pytest.raises(ConfigError, match=rf"^{name}=.*; valid: "):
        LoadLimits(**{name: value})
    home = tmp_path_factory.mktemp("kb")
    kb = KnowledgeBase("docs", home, embedding=DeterministicFakeEmbedding(size=8))
    with pytest.raises(ConfigError, match=rf"{name}=.*; valid: "):
        kb.add_documents(home, limits={name: value})
    assert not kb.exists   # refused before anything was written
    with pytest.raises(ConfigError, match=rf"{name}=.*; valid: "):
        Resource.from_directory("d", home, embedding=DeterministicFakeEmbedding(size=8), limits={name: value})
    with pytest.raises(ConfigError, match=rf"resources\[0\]\.index: .*{name}=.*; valid: "):
        parse_config({"resources": [{"name": "d", "kind": "knowledge_base", "index": {"paths": ["x"], name: value}}]})


def test_unknown_limit_names_and_bad_cli_values_are_one_clear_line(tmp_path, capsys):
    with pytest.raises(ConfigError, match="unknown load limit 'tabels'; valid: tables, "):
        LoadLimits.of({"tabels": "none"})
    (tmp_path / "a.txt").write_text("Paris is in France.")
    argv = ["index", str(tmp_path / "a.txt"), "--store", str(tmp_path / "s"), "--embedding", "fake"]
    assert cli.main([*argv, "--table-seconds", "-1"]) == 2
    assert capsys.readouterr().err == "rag index: error: table_seconds=-1.0; valid: a number of seconds, 0 or more " \
                                      "(0: no table detection)\n"
    assert cli.main([*argv, "--ocr-dpi", "5000"]) == 2
    assert "ocr_dpi=5000; valid: an integer from 50 to 600" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


def test_cli_and_config_set_the_same_limits(tmp_path, capsys):
    (tmp_path / "docs").mkdir()
    inflating_pdf(tmp_path / "docs" / "rows.pdf", rows=2_000)   # 46,000 characters: over the default page limit
    store, docs = str(tmp_path / "s"), str(tmp_path / "docs")
    assert cli.main(["index", docs, "--store", store, "--embedding", "fake"]) == 0
    assert "rows.pdf: page 1: tables not detected (45,998 characters" in capsys.readouterr().err
    assert cli.main(["index", docs, "--store", store, "--embedding", "fake", "--table-max-chars",
                     "100000", "--table-max-objects", "100000", "--no-ocr", "--tables", "pdfium"]) == 0
    err = capsys.readouterr().err
    assert "updated 1" in err and "note" not in err   # read again under the new limits, and nothing hit one
    config = parse_config({"resources": [{"name": "d", "kind": "knowledge_base", "index": {
        "paths": ["x"], "tables": "pdfium", "table_max_chars": 100_000, "table_max_objects": 100_000, "ocr": False}}]})
    assert config.resources[0].index.limits == LoadLimits(table_max_chars=100_000, table_max_objects=100_000,
                                                          ocr=False)


def test_a_changed_limit_rereads_the_files_it_changes_and_only_those(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    inflating_pdf(docs / "rows.pdf", rows=2_000)
    (docs / "notes.md").write_text("# Notes\n\nParis is in France.\n")
    kb = KnowledgeBase("docs", tmp_path / "store", embedding=DeterministicFakeEmbedding(size=8))
    first = kb.add_documents(docs)
    assert len(first.added) == 2 and [n.note.split(":")[0] for n in first.notes] == ["page 1"]
    assert not kb.add_documents(docs).changed
    lifted = {"table_max_chars": 10**6, "table_max_objects": 10**6}
    again = kb.add_documents(docs, limits=lifted)
    assert again.updated == [str(docs / "rows.pdf")] and again.unchanged == [str(docs / "notes.md")]
    assert not again.notes
    assert not kb.add_documents(docs, limits=lifted).changed   # recorded: the same limits read nothing again
    assert kb.add_documents(docs).updated == [str(docs / "rows.pdf")]   # back to the defaults: read again
    # the defaults add nothing to the hash but the version of the PDF reader
    assert {r.source.rsplit(".", 1)[1]: r.content_hash[64:] for r in kb.list_documents()} == {"pdf": "+reader=2",
                                                                                              "md": ""}


def test_time_budgets_are_not_recorded(tmp_path):
    inflating_pdf(tmp_path / "rows.pdf", rows=200)
    kb = KnowledgeBase("docs", tmp_path / "store", embedding=DeterministicFakeEmbedding(size=8))
    kb.add_documents(tmp_path)
    assert not kb.add_documents(tmp_path, limits={"table_seconds": 0, "table_page_seconds": 1}).changed
    forced = kb.update_document(tmp_path / "rows.pdf", limits={"table_seconds": 0})   # re-read on request
    assert forced.updated and "table_seconds=0 spent on this file" in forced.notes[0].note
    assert LoadLimits(table_seconds=5, table_page_seconds=1, max_bytes=10).reading(".pdf") == ""


def test_config_index_block_passes_limits_and_logs_what_hit_one(tmp_path, caplog):
    docs = tmp_path / "docs"
    docs.mkdir()
    inflating_pdf(docs / "rows.pdf", rows=300)
    spec = {"resources": [{"name": "d", "kind": "knowledge_base", "path": str(tmp_path / "s"),
                           "index": {"paths": [str(docs)], "table_max_chars": 1_000}}]}
    with caplog.at_level(logging.WARNING, logger="rag.config.resources"):
        from_config(RAG, spec, embedding=DeterministicFakeEmbedding(size=8), llm=FakeListChatModel(responses=["ok"]))
    assert any("note" in r.getMessage() and "limits 1,000 / 20,000" in r.getMessage() for r in caplog.records)


def test_from_directory_takes_limits_and_logs_what_hit_one(tmp_path, caplog):
    inflating_pdf(tmp_path / "rows.pdf", rows=300)
    with caplog.at_level(logging.WARNING, logger="rag.compose.resource"):
        Resource.from_directory("d", tmp_path, embedding=DeterministicFakeEmbedding(size=8),
                                limits=LoadLimits(table_max_objects=10))
    assert any("rows.pdf: page 1: tables not detected" in r.getMessage() and "limits 20,000 / 10" in r.getMessage()
               for r in caplog.records)


def test_pdfplumber_is_cut_off_per_page_and_the_pages_are_read_as_text(tmp_path):
    path = tmp_path / "rows.pdf"
    inflating_pdf(path, rows=400, pages=2)
    plain = load_file(path, limits=LoadLimits(tables=False, ocr=False))
    notes: list[str] = []
    docs = load_file(path, limits=LoadLimits(tables="pdfplumber", table_page_seconds=0, ocr=False), notes=notes)
    assert notes == ["pages 1, 2: tables not detected (cut off after table_page_seconds=0); read as text"]
    assert [d.page_content for d in docs] == [d.page_content for d in plain]


# (an interrupt that lands in Hypothesis's garbage-collector callback is swallowed there, reported as unraisable,
# and sent again 10 ms later: that is the case this test once caught)
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_page_pdfplumber_would_read_for_long_is_interrupted_by_the_watchdog(tmp_path):
    """3,000 rows let through the per-page limits: pdfplumber would take many seconds; the budget is 0.05 s."""
    path = tmp_path / "rows.pdf"
    inflating_pdf(path, rows=3_000)
    plain = load_file(path, limits=LoadLimits(tables=False, ocr=False))
    notes: list[str] = []
    docs = load_file(path, notes=notes, limits=LoadLimits(tables="pdfplumber", table_page_seconds=0.05, ocr=False,
                                                          table_max_chars=10**6, table_max_objects=10**6))
    assert notes == ["page 1: tables not detected (cut off after table_page_seconds=0.05); read as text"]
    assert [d.page_content for d in docs] == [d.page_content for d in plain]
    assert not any(t.name == "rag-page-watchdog" for t in threading.enumerate())   # stopped with the file


@settings(max_examples=30, deadline=None)
@given(steps=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=1, max_size=6))
def test_a_watchdog_interrupt_never_escapes_the_step_it_was_meant_for(steps):
    """Budgets and work of a few milliseconds, so the interrupt often lands as a step ends."""
    outcomes = []
    with Watchdog(0.001) as dog:
        for work, _ in steps:
            try:
                with dog.step():
                    end = time.perf_counter() + work / 1000
                    while time.perf_counter() < end:
                        pass
                outcomes.append("done")
            except PageTimeout:
                outcomes.append("cut")
            for _ in range(2_000):   # plain work after the step: an escaped interrupt would land here
                pass
    assert len(outcomes) == len(steps)
    with Watchdog(60) as slow, slow.step():
        pass   # a step within its budget finishes


def test_a_watchdog_cuts_off_a_long_step_and_only_that_one():
    with Watchdog(0.05) as dog:
        with pytest.raises(PageTimeout), dog.step():
            while True:
                pass
        with dog.step():
            total = sum(range(1000))
    assert total == 499500


def test_a_budget_of_a_microsecond_cuts_every_step_and_never_hangs():
    """The interrupt comes at once, so it often arrives while a step is being armed or ended."""
    cut = 0
    with Watchdog(1e-6) as dog:
        for _ in range(100):
            try:
                with dog.step():
                    while True:
                        pass
            except PageTimeout:
                cut += 1
    assert cut == 100


def test_files_a_newer_reader_reads_differently_are_read_again_once(tmp_path, make_pdf):
    """A knowledge base indexed before the PDF reader's version was recorded (records without the tag) re-reads its
    PDFs and HTML pages once, with today's reader; its text files stay as they are."""
    from dataclasses import replace

    docs = tmp_path / "docs"
    docs.mkdir()
    make_pdf(docs / "filing.pdf", ["ACME 10-K 2023\nRevenue rose 4% to $12 million."])
    (docs / "page.html").write_text("<html><body><main><h1>Notes</h1><p>The board met in May.</p></main></body></html>")
    (docs / "notes.md").write_text("# Notes\n\nParis is in France.\n")
    kb = KnowledgeBase("docs", tmp_path / "store", embedding=DeterministicFakeEmbedding(size=8))
    kb.add_documents(docs)
    kb.records.put_many([replace(r, content_hash=r.content_hash[:64]) for r in kb.list_documents()])   # older
    again = kb.add_documents(docs)
    assert sorted(again.updated) == [str(docs / "filing.pdf"), str(docs / "page.html")]
    assert again.unchanged == [str(docs / "notes.md")]
    assert not kb.add_documents(docs).changed   # recorded: read once
