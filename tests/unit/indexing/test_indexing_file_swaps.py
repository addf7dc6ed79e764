"""Folders that change under the run: a listed file swapped for a link, a FIFO, a device (issue 37, item 4).

The walk lists the files; the swap happens after it (through `iter_files`, the walk itself), before the plan
opens them. Whatever the swap, the run ends, reads nothing outside the folder and skips the swapped file with
the reason; the other files are indexed.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.embeddings import DeterministicFakeEmbedding

from rag.base.errors import LoaderError
from rag.compose.knowledge_base import KnowledgeBase
from rag.indexing import sync
from rag.indexing.file_read import read_file
from rag.indexing.loaders import iter_files, load_file

_SWAPS = ("link-outside", "fifo", "dev-zero", "folder", "gone")


def _swap(file: Path, kind: str, secret: Path) -> None:
    file.unlink()
    if kind == "link-outside":
        file.symlink_to(secret)
    elif kind == "fifo":
        os.mkfifo(file)
    elif kind == "dev-zero":
        file.symlink_to("/dev/zero")
    elif kind == "folder":
        file.mkdir()


@pytest.fixture
def swap_after_walk(monkeypatch):
    """`swap_after_walk({name: kind}, secret)`: the next walk's files are swapped once it has listed them."""

    def arm(swaps: dict[str, str], secret: Path) -> None:
        def walk_then_swap(*args, **kwargs):
            listed = list(iter_files(*args, **kwargs))
            for file, _ in listed:
                if file.name in swaps:
                    _swap(file, swaps[file.name], secret)
            yield from listed

        monkeypatch.setattr(sync, "iter_files", walk_then_swap)

    return arm


def _run_bounded(fn, seconds: float = 60.0):
    """fn() in a thread; fails (instead of hanging the suite) when it has not returned within `seconds`."""
    box: dict = {}
    thread = threading.Thread(target=lambda: box.update(result=fn()), daemon=True)
    thread.start()
    thread.join(seconds)
    return thread.is_alive(), box.get("result")


def _unblock(folder: Path) -> None:
    """Open every FIFO under `folder` for writing and close it, so a reader stuck in open() goes on."""
    for path in folder.rglob("*"):
        if path.is_fifo():
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass


def _corpus(root: Path, names: list[str]) -> tuple[Path, Path]:
    secret = root / "outside" / "secret.md"
    secret.parent.mkdir(parents=True)
    secret.write_text("# Secret\n\nThe password is swordfish.")
    folder = root / "docs"
    folder.mkdir()
    for n, name in enumerate(names):
        (folder / name).write_text(f"# Doc {n}\n\nOrdinary words of document {n}.")
    return folder, secret


@pytest.mark.parametrize("kind", _SWAPS)
def test_a_file_swapped_after_the_walk_is_skipped_and_the_run_ends(tmp_path, swap_after_walk, kind):
    folder, secret = _corpus(tmp_path, ["a.md", "b.md"])
    kb = KnowledgeBase("docs", tmp_path / "store", embedding=DeterministicFakeEmbedding(size=8))
    swap_after_walk({"a.md": kind}, secret)
    try:
        hung, report = _run_bounded(lambda: kb.add_documents(str(folder)))
    finally:
        _unblock(folder)
    assert not hung, f"indexing blocked on a file swapped for {kind}"
    texts = " ".join(d.page_content for d in kb.get_documents())
    assert "swordfish" not in texts and "document 1" in texts
    assert [Path(s.path).name for s in report.skipped] == ["a.md"]
    assert report.added == [str(folder / "b.md")]
    kb.add_documents(str(folder))   # the writer lock was released: later runs work


def test_links_the_walk_accepts_are_read_as_their_target(tmp_path):
    folder, secret = _corpus(tmp_path, ["a.md"])
    (folder / "inner").mkdir()
    (folder / "inner" / "link.md").symlink_to(folder / "a.md")
    files = [f for f, _ in iter_files(folder)]
    assert files == [folder / "a.md", folder / "a.md"]   # the link, listed as its target (indexed once)
    (folder / "out.md").symlink_to(secret)
    assert [f for f, _ in iter_files(folder, follow_symlinks=True)][-1] == secret


@pytest.mark.parametrize("special", ["/dev/zero", "/dev/null"])
def test_devices_and_fifos_are_refused_without_blocking(tmp_path, special):
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    hung, _ = _run_bounded(lambda: pytest.raises(LoaderError, load_file, fifo), 20)
    _unblock(tmp_path)
    assert not hung
    with pytest.raises(LoaderError, match="not a regular file"):
        read_file(special, max_bytes=1 << 20)
    with pytest.raises(LoaderError, match="not a regular file"):
        read_file(fifo, max_bytes=1 << 20)


def test_a_link_is_never_read_through(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("swordfish")
    link = tmp_path / "link.txt"
    link.symlink_to(secret)
    with pytest.raises(LoaderError, match="symbolic link"):
        load_file(link)


def test_a_file_that_grows_past_the_limit_while_read_is_refused(tmp_path):
    big = tmp_path / "big.txt"
    big.write_text("x" * 100)
    with pytest.raises(LoaderError, match="max_bytes=50"):
        read_file(big, max_bytes=50)
    assert read_file(big, max_bytes=100).data == b"x" * 100


_SLOW = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@_SLOW
@given(swaps=st.dictionaries(st.sampled_from(["a.md", "b.md", "c.txt", "d.html"]), st.sampled_from(_SWAPS),
                             max_size=3),
       follow=st.booleans())
def test_any_swaps_after_the_walk_never_read_outside_and_never_block(tmp_path_factory, monkeypatch, swaps, follow):
    root = tmp_path_factory.mktemp("case")
    names = ["a.md", "b.md", "c.txt", "d.html"]
    folder, secret = _corpus(root, names)

    def walk_then_swap(*args, **kwargs):
        listed = list(iter_files(*args, **kwargs))
        for file, _ in listed:
            if file.name in swaps:
                _swap(file, swaps[file.name], secret)
        yield from listed

    monkeypatch.setattr(sync, "iter_files", walk_then_swap)
    kb = KnowledgeBase("docs", root / "store", embedding=DeterministicFakeEmbedding(size=8))
    try:
        hung, report = _run_bounded(lambda: kb.add_documents(str(folder), follow_symlinks=follow))
    finally:
        _unblock(folder)
    assert not hung
    assert "swordfish" not in " ".join(d.page_content for d in kb.get_documents())
    skipped = {Path(s.path).name for s in report.skipped}
    assert sorted(Path(a).name for a in report.added) == sorted(set(names) - set(swaps))
    # every swapped file is skipped with its reason; links to one target are one file to the plan (reported once)
    links = {swaps[n] for n in swaps if swaps[n] in ("link-outside", "dev-zero")}
    assert {n for n in swaps if swaps[n] not in links} <= skipped <= set(swaps)
    assert len(skipped) == len(swaps) - sum(list(swaps.values()).count(k) - 1 for k in links)
