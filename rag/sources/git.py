"""`GitSource`: the files of a git repository at a revision; only the files whose blob changed are read.

The listing is `git ls-tree` of the revision: each file's id is `git:<repository>@<revision>/<path>`
and its version is its blob id, so a re-sync reads (`git cat-file`) only the files whose content
changed, and a file deleted in a later commit is deleted from the knowledge base. A repository given
by URL is cloned once (bare, without blobs: `--filter=blob:none`) into `cache_dir` and fetched on each
listing; a local path is read where it is.

Guarded: only the `file`, `git`, `http`, `https` and `ssh` transports (`ext::` would run a command), a
revision or URL starting with `-` is refused (it would be an option), symlinks and submodules are
listed as skipped, and a blob over `max_bytes` is skipped unread. Needs the `git` program.

Example:
    >>> GitSource("https://example.org/r.git", revision="-x")
    Traceback (most recent call last):
    ...
    rag.base.errors.ConfigError: revision must be a branch, tag or commit (letters, digits, '/', '.', '_', '-', '^', '~'; not starting with '-'), got '-x'
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from rag.base.errors import ConfigError, MissingDependencyError
from rag.sources.base import (
    Fetched,
    Source,
    SourceError,
    SourceItem,
    access_map_from,
    check_key,
    check_patterns,
    write_temporary,
)

__all__ = ["GitSource"]

_REVISION = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_./^~-]{0,199}$")
_URL = re.compile(r"^(https?|ssh|git|file)://|^[A-Za-z0-9_.-]+@[A-Za-z0-9_.-]+:")
_ENV = {"GIT_ALLOW_PROTOCOL": "file:git:http:https:ssh", "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "true",
        "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C"}


class GitSource(Source):
    """A git repository at a revision (see the module docstring).

    Args:
        repository: a local path (a work tree or a bare repository) or a URL.
        revision: a branch, tag or commit (default HEAD).
        include, exclude: globs over paths in the repository.
        cache_dir: where a repository given by URL is cloned (default: a folder under the system's temp dir,
            named by the URL, kept between runs).
        max_bytes: larger files are skipped unread.
        access: glob over item ids -> `{users, groups, public}`.
    """

    def __init__(self, repository: str | Path, *, revision: str = "HEAD", include: str | Sequence[str] = "**/*",
                 exclude: str | Sequence[str] = (), cache_dir: str | Path | None = None,
                 max_bytes: int = 256 * 1024 * 1024, access: Mapping[str, Any] | None = None) -> None:
        text = str(repository)
        if not text or text.startswith("-") or "::" in text:
            raise ConfigError(f"repository must be a path or a URL (file, git, http, https, ssh); got {text[:120]!r}")
        if not isinstance(revision, str) or not _REVISION.match(revision) or ".." in revision:
            raise ConfigError("revision must be a branch, tag or commit (letters, digits, '/', '.', '_', '-', '^', "
                              f"'~'; not starting with '-'), got {str(revision)[:80]!r}")
        self.remote = bool(_URL.match(text))
        self.repository = text if self.remote else str(Path(text).resolve())
        self.revision = revision
        self.include, self.exclude = check_patterns(include, "include"), check_patterns(exclude, "exclude")
        self.max_bytes = int(max_bytes)
        self.cache_dir = Path(cache_dir) if cache_dir is not None else Path(tempfile.gettempdir()) / "rag-git"
        self.prefix = f"git:{self.repository}@{revision}/"
        self.access_map = access_map_from(access)
        self._sizes: dict[str, tuple[str, int]] = {}

    def __repr__(self) -> str:
        return f"GitSource({self.repository!r}, revision={self.revision!r})"

    def _git(self, *args: str, git_dir: str | None = None, binary: bool = False) -> Any:
        if shutil.which("git") is None:
            raise MissingDependencyError("GitSource needs the git program on PATH (apt install git, brew install git)")
        command = ["git", "-c", "protocol.ext.allow=never", "-c", "core.fsmonitor=false"]
        if git_dir is not None:
            command += ["--git-dir", git_dir]
        run = subprocess.run([*command, *args], capture_output=True, env={**os.environ, **_ENV}, timeout=600,
                             check=False)
        if run.returncode != 0:
            raise SourceError(f"{self.repository}: git {args[0]} failed: "
                              f"{run.stderr.decode('utf-8', 'replace').strip()[:400]}")
        return run.stdout if binary else run.stdout.decode("utf-8", "surrogateescape")

    def _git_dir(self) -> str:
        """The repository's git folder: cloned or fetched for a URL, found for a path."""
        if not self.remote:
            found = self._git("-C", self.repository, "rev-parse", "--absolute-git-dir").strip()
            return found
        clone = self.cache_dir / hashlib.sha256(self.repository.encode()).hexdigest()[:24]
        if not (clone / "HEAD").exists():
            clone.parent.mkdir(parents=True, exist_ok=True)
            self._git("clone", "--bare", "--filter=blob:none", "--", self.repository, str(clone))
        else:
            self._git("fetch", "--prune", "origin", "+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*",
                      git_dir=str(clone))
        return str(clone)

    def items(self) -> Iterator[SourceItem]:
        """The files at the revision, versioned by blob id (`git ls-tree -r -l`)."""
        git_dir = self._git_dir()
        commit = self._git("rev-parse", "--verify", "--end-of-options", f"{self.revision}^{{commit}}",
                           git_dir=git_dir).strip()
        listing = self._git("ls-tree", "-r", "-l", "-z", "--full-tree", commit, git_dir=git_dir)
        self._sizes = {}
        self._dir = git_dir
        for entry in listing.split("\0"):
            if not entry:
                continue
            meta, path = entry.split("\t", 1)
            mode, kind, blob, size = meta.split()
            if not self._wanted(path):
                continue
            item_id = self.prefix + path
            if why := check_key(path):
                yield SourceItem(item_id, error=why)
            elif kind != "blob" or mode == "120000":
                yield SourceItem(item_id, error=f"{'symlink' if mode == '120000' else kind}; not followed")
            elif int(size) > self.max_bytes:
                yield SourceItem(item_id, error=f"{int(size):,} bytes is more than max_bytes={self.max_bytes:,}")
            else:
                self._sizes[item_id] = (blob, int(size))
                yield SourceItem(item_id, version=blob, name=path.rsplit("/", 1)[-1],
                                 metadata={"git_path": path})

    def _wanted(self, path: str) -> bool:
        name = path.rsplit("/", 1)[-1]
        if any(part.startswith(".") for part in path.split("/")):
            return False   # hidden files and folders, as for local folders
        def matches(patterns: tuple[str, ...]) -> bool:
            return any(fnmatch(path, p) or fnmatch(name, p) or (p.startswith("**/") and fnmatch(path, p[3:]))
                       for p in patterns)
        return matches(self.include) and not matches(self.exclude)

    def fetch(self, item: SourceItem) -> Fetched:
        """The file's bytes (`git cat-file blob`)."""
        blob, _size = self._sizes.get(item.id, (None, 0))
        if blob is None:
            raise SourceError(f"{item.id}: not in the last listing")
        data = self._git("cat-file", "blob", blob, git_dir=self._dir, binary=True)
        return write_temporary(item.name, data)
