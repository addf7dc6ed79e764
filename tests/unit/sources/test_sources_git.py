"""`GitSource` on a real repository made by the test (the `git` program): only changed blobs are read."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from source_helpers import CountsReads, chunk_sources

from rag.base.errors import ConfigError
from rag.sources.git import GitSource

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git program")

_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.org", "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1"}


def _git(repo: Path, *args: str) -> str:
    import os

    run = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                         env={**os.environ, **_ENV}, check=True)
    return run.stdout


def _commit(repo: Path, files: dict[str, str | None], message: str = "change") -> None:
    for name, text in files.items():
        path = repo / name
        if text is None:
            path.unlink()
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", message)


@pytest.fixture
def repo(tmp_path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _commit(repo, {"README.md": "# Readme\n\nThe project indexes documents.\n",
                   "docs/guide.md": "# Guide\n\nRun rag index to build a knowledge base.\n",
                   "docs/notes.txt": "Plain notes about chunking.\n",
                   "src/app.bin": "not a document\n",
                   ".hidden/secret.md": "# Hidden\n"}, "first")
    return repo


class _Counting(CountsReads, GitSource):
    pass


def test_a_repository_is_indexed_at_a_revision_and_a_re_sync_reads_nothing(kb, repo, counting):
    source = _Counting(repo, revision="main")
    report = kb.sync(source)
    assert sorted(p.removeprefix(source.prefix) for p in report.added) == ["README.md", "docs/guide.md",
                                                                          "docs/notes.txt"]
    assert report.unsupported == [source.prefix + "src/app.bin"]   # no loader reads .bin: not read
    chunk = kb.get_documents({"source": source.prefix + "docs/guide.md"})[0]
    assert chunk.metadata["title"] == "Guide" and chunk.metadata["git_path"] == "docs/guide.md"
    source.read.clear()
    counting.texts.clear()
    again = kb.sync(source)
    assert source.read == [] and again.embedded == 0 and not again.changed


def test_only_changed_files_are_read_and_deleted_files_are_deleted(kb, repo):
    source = _Counting(repo, revision="main")
    kb.sync(source)
    _commit(repo, {"docs/guide.md": "# Guide\n\nRun rag sync to keep it current.\n", "docs/notes.txt": None,
                   "docs/new.md": "# New\n\nA new page.\n"})
    source.read.clear()
    report = kb.sync(source)
    assert sorted(source.read) == ["docs/guide.md", "docs/new.md"]
    assert report.updated == [source.prefix + "docs/guide.md"] and report.added == [source.prefix + "docs/new.md"]
    assert report.deleted == [source.prefix + "docs/notes.txt"]
    assert source.prefix + "docs/notes.txt" not in chunk_sources(kb)


def test_an_older_revision_is_indexed_as_it_was(kb, repo):
    first = _git(repo, "rev-parse", "HEAD").strip()
    _commit(repo, {"README.md": "# Readme\n\nRewritten.\n"})
    source = GitSource(repo, revision=first, include="*.md")
    kb.sync(source)
    texts = [d.page_content for d in kb.get_documents({"source": source.prefix + "README.md"})]
    assert any("indexes documents" in t for t in texts)


def test_a_repository_given_by_url_is_cloned_then_fetched(kb, repo, tmp_path):
    source = GitSource(f"file://{repo}", revision="main", cache_dir=tmp_path / "cache")
    assert len(kb.sync(source).added) == 3
    _commit(repo, {"docs/guide.md": "# Guide\n\nUpdated upstream.\n"})
    assert kb.sync(source).updated == [source.prefix + "docs/guide.md"]


def test_symlinks_in_the_repository_are_skipped_with_the_reason(kb, repo):
    (repo / "link.md").symlink_to("/etc/passwd")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "link")
    report = kb.sync(GitSource(repo))
    assert any("symlink; not followed" in s.reason for s in report.skipped)


@pytest.mark.parametrize("repository, revision", [("ext::sh -c touch% /tmp/pwned", "HEAD"), ("-uhoh", "HEAD"),
                                                  ("/tmp/repo", "--upload-pack=touch"), ("/tmp/repo", "a..b")])
def test_option_injection_and_the_ext_transport_are_refused(repository, revision):
    with pytest.raises(ConfigError):
        GitSource(repository, revision=revision)


def test_an_unknown_revision_fails_the_listing_and_deletes_nothing(kb, repo):
    kb.sync(GitSource(repo, revision="main"))
    source = GitSource(repo, revision="main")
    source.revision = "no-such-branch"
    report = kb.sync(source)
    assert report.deleted == [] and "git rev-parse failed" in report.skipped[0].reason
