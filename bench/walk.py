"""The walk of one `rag ask`: which of rag's modules a reader passes through, in order (issue 41).

One `rag ask` is run (after a warm-up ask, so imports and caches are out of the way) under a profiler
(`sys.setprofile` / `threading.setprofile`) that sees every call into a function defined under `rag/`.
A call is part of the walk when it is at most `--depth` rag frames deep (the CLI's `main` is depth 1;
frames of other libraries do not count; a worker thread starts at the depth of the thread that waits on
it). The walk is the sequence of modules those calls are in; then:

- a *stay* is a maximal run of the walk in one module (a room), so `stays` counts the moves plus one;
- *rooms* are the distinct modules of the walk;
- a *climb* is a stay in a room the walk had already left (coming back up through a module);
- `manifest` counts the calls into `rag/indexing/manifest.py` from another module, at any depth (the
  issue: the manifest was checked twice, with three climbs through it).

Usage (from the repository root; the store is indexed once into a temporary folder):

    PYTHONPATH=$PWD HF_HUB_OFFLINE=1 python bench/walk.py [--depth 4] [--corpus docs/retrieval.md ...]

Prints the walk and one JSON line of counts. It measures reading, not speed: no timing is taken.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import shutil
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = str(ROOT / "rag") + "/"


class Walk:
    """Records the module of every rag call at most `depth` rag frames deep, per thread."""

    def __init__(self, depth: int) -> None:
        self.depth = depth
        self.modules: list[str] = []
        self.manifest = 0
        self.manifest_callers: dict[str, int] = {}
        self.local = threading.local()
        self.lock = threading.Lock()
        self.main_depth = 0

    def _stack(self) -> list[str]:
        stack = getattr(self.local, "stack", None)
        if stack is None:
            stack = self.local.stack = []
            self.local.base = 0 if threading.current_thread() is threading.main_thread() else self.main_depth
        return stack

    def profile(self, frame: Any, event: str, arg: Any) -> None:
        if event not in ("call", "return"):
            return
        filename = frame.f_code.co_filename
        if not filename.startswith(PACKAGE):
            return
        module = filename[len(PACKAGE) - len("rag/"):]
        stack = self._stack()
        if event == "return":
            if stack:
                stack.pop()
                if threading.current_thread() is threading.main_thread():
                    self.main_depth = len(stack)
            return
        caller = stack[-1] if stack else None
        stack.append(module)
        depth = self.local.base + len(stack)
        if threading.current_thread() is threading.main_thread():
            self.main_depth = len(stack)
        with self.lock:
            if module.endswith("indexing/manifest.py") and caller != module:
                self.manifest += 1
                where = f"{caller}:{frame.f_back.f_code.co_name} -> {frame.f_code.co_name}" if frame.f_back else "?"
                self.manifest_callers[where] = self.manifest_callers.get(where, 0) + 1
            if depth <= self.depth:
                self.modules.append(module)

    def counts(self) -> dict[str, Any]:
        stays = [m for i, m in enumerate(self.modules) if i == 0 or self.modules[i - 1] != m]
        seen: set[str] = set()
        climbs = []
        for i, module in enumerate(stays):
            if module in seen and stays[i - 1] != module:
                climbs.append(module)
            seen.add(module)
        return {"depth": self.depth, "stays": len(stays), "rooms": len(seen), "climbs": len(climbs),
                "climbs_through": sorted(set(climbs)), "manifest_calls": self.manifest, "manifest_callers": self.manifest_callers, "walk": stays}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--depth", type=int, default=4, help="rag frames deep that count (default: %(default)s)")
    parser.add_argument("--corpus", nargs="*", default=["docs/filters.md", "docs/retrieval.md"],
                        help="files to index (default: %(default)s)")
    parser.add_argument("--question", default="How is a filter validated?")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from rag import cli

    work = Path(tempfile.mkdtemp(prefix="rag-walk-"))
    try:
        corpus = work / "corpus"
        corpus.mkdir()
        for name in args.corpus:
            shutil.copy(ROOT / name, corpus / Path(name).name)
        store = str(work / "store")
        ask = ["ask", args.question, "--store", store, "--json", "--k", "6", "--filter", '{"source": {"$ne": "elsewhere.md"}}']
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            if cli.main(["index", str(corpus), "--store", store]) != 0 or cli.main(ask) != 0:   # index, warm up
                raise SystemExit("indexing or the warm-up ask failed")
        walk = Walk(args.depth)
        threading.setprofile(walk.profile)
        sys.setprofile(walk.profile)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                code = cli.main(ask)
        finally:
            sys.setprofile(None)
            threading.setprofile(None)   # type: ignore[arg-type]
        counts = walk.counts()
        for i, module in enumerate(counts.pop("walk"), start=1):
            print(f"{i:3d} {module}")
        print(json.dumps({"exit": code, **counts}))
        return code
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
