"""The walk of one `rag ask`: which of rag's modules a reader passes through, in order (issue 41).

One `rag ask` is run (after a warm-up ask, so imports and caches are out of the way) under a profiler
(`sys.setprofile` / `threading.setprofile`) that sees every call into a function defined under `rag/`.
The calls form a tree: a call's parent is the rag call it was made from; a call made in a worker thread
hangs under the rag call that submitted the work (`ThreadPoolExecutor.submit`) or started the thread.
The walk is that tree read depth first, as a reader follows the calls, cut at `--depth` rag frames (the
CLI's `main` is depth 1; frames of other libraries do not count). Comprehensions and generator
expressions are part of the function they are written in (Python 3.12 inlines comprehensions): no call
of their own. Then:

- a *stay* is a maximal run of the walk in one module (a room), so `stays` counts the moves plus one;
- *rooms* are the distinct modules of the walk;
- a *climb* is a stay in a room the walk had already left (coming back up through a module);
- the manifest (`rag/indexing/manifest.py`), at any depth: `manifest_calls` counts the calls into it
  from another module, with their callers; `manifest_climbs` the calls from a module that had already
  called into it (going back up to that module and down into the manifest again); `manifest_stays` its
  stays in the whole walk, with the rooms before and after each.

Counting before session 37 (25 stays / 14 rooms / 11 climbs on main at 09279b9, depth 4) differed in
three ways, each an error: a worker thread started at the depth the *main* thread had at the time (the
hybrid search's two threads, 8 frames deep under the pipeline, counted at depth 4); comprehension
frames were calls (`<dictcomp>` in `cmd_ask` was a climb back into `cli/ask.py` on Python 3.11, not on
3.12); threads were read in clock order, so concurrent calls interleaved. The same tree reads 20 / 13 / 7.

Session 38 (depth 4): 14 / 10 / 4 -> 12 / 10 / 2. `rag ask` resolves one typed request at the CLI's door
(`rag.cli.request`: its arguments, the store options and the filter, validated once; the command runs on
it), and a RAG's own retrieval (each resource's branch, the aggregate) is built beside the input step that
runs it (`rag.compose.input_step.resources_chain`). The two climbs left are the answer's module
(`rag_with_source`: the chain is built, then run, as LangChain does) and `rag.cli.request` (the store
options resolved after the filter, so mistakes are reported in the order the options are read).

Usage (from the repository root; the store is indexed once into a temporary folder):

    PYTHONPATH=$PWD HF_HUB_OFFLINE=1 python bench/walk.py [--depth 4] [--corpus docs/retrieval.md ...]

Prints the walk and one JSON line of counts. It measures reading, not speed: no timing is taken.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import io
import json
import shutil
import sys
import tempfile
import threading
import itertools
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = str(ROOT / "rag") + "/"
MANIFEST = "rag/indexing/manifest.py"


#: code objects of comprehensions and generator expressions: part of the function they are written in
#: (Python 3.12 inlines the comprehensions, PEP 709), so they are no room of their own and no frame deeper
_INLINE = ("<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>")


class Call:
    """One call into rag: its module, function, depth in rag frames and the calls it made."""

    __slots__ = ("module", "function", "depth", "key", "children")

    def __init__(self, module: str, function: str, depth: int, key: int) -> None:
        self.module, self.function, self.depth, self.key = module, function, depth, key
        self.children: list[Call] = []


class Walk:
    """The tree of rag calls, across threads: a call made in a worker thread is a child of the call that
    submitted the work (`ThreadPoolExecutor.submit`) or started the thread (`Thread.start`)."""

    def __init__(self, depth: int) -> None:
        self.depth = depth
        self.root = Call("", "", 0, 0)
        self.local = threading.local()
        self.lock = threading.Lock()
        self.counter = itertools.count(1)

    def _stack(self) -> list[Call]:
        stack = getattr(self.local, "stack", None)
        if stack is None:
            stack = self.local.stack = []
        return stack

    def current(self) -> tuple[Call, int]:
        """The call this thread is in now (the one new work hangs under), and a key for ordering."""
        stack = self._stack()
        return (stack[-1] if stack else self._origin()), next(self.counter)

    def _origin(self) -> Call:
        origin = getattr(self.local, "origin", None)
        if origin is None:
            origin = getattr(threading.current_thread(), "_walk_origin", None)
        return origin[0] if origin else self.root

    def profile(self, frame: Any, event: str, arg: Any) -> None:
        if event not in ("call", "return"):
            return
        filename = frame.f_code.co_filename
        if not filename.startswith(PACKAGE):
            return
        stack = self._stack()
        if event == "return":
            if stack:
                stack.pop()
            return
        parent = stack[-1] if stack else self._origin()
        if frame.f_code.co_name in _INLINE:   # the enclosing function's own code
            stack.append(parent)
            return
        module = filename[len(PACKAGE) - len("rag/"):]
        key = next(self.counter)
        if not stack:   # the first call of a piece of work in a worker: ordered as it was submitted
            origin = getattr(self.local, "origin", None) or getattr(threading.current_thread(), "_walk_origin", None)
            key = origin[1] if origin else key
        call = Call(module, frame.f_code.co_name, parent.depth + 1, key)
        with self.lock:
            parent.children.append(call)
        stack.append(call)

    @contextlib.contextmanager
    def tracing(self) -> Iterator[None]:
        """Profile every thread; remember which call submitted each piece of work or started each thread."""
        walk = self
        submit, start = concurrent.futures.ThreadPoolExecutor.submit, threading.Thread.start

        def traced_submit(executor: Any, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
            origin = walk.current()

            def run(*a: Any, **kw: Any) -> Any:   # (a pool's thread may predate `threading.setprofile`)
                saved, walk.local.origin = getattr(walk.local, "origin", None), origin
                profiler = sys.getprofile()
                sys.setprofile(walk.profile)
                try:
                    return fn(*a, **kw)
                finally:
                    sys.setprofile(profiler)
                    walk.local.origin = saved
            return submit(executor, run, *args, **kwargs)

        def traced_start(thread: threading.Thread) -> None:
            thread._walk_origin = walk.current()   # type: ignore[attr-defined]
            start(thread)

        concurrent.futures.ThreadPoolExecutor.submit = traced_submit   # type: ignore[method-assign]
        threading.Thread.start = traced_start   # type: ignore[method-assign]
        threading.setprofile(self.profile)
        sys.setprofile(self.profile)
        try:
            yield
        finally:
            sys.setprofile(None)
            threading.setprofile(None)   # type: ignore[arg-type]
            concurrent.futures.ThreadPoolExecutor.submit = submit   # type: ignore[method-assign]
            threading.Thread.start = start   # type: ignore[method-assign]

    def calls(self, depth: int | None) -> Iterator[Call]:
        """The calls in the order a reader follows them (depth first), at most `depth` deep (None: all)."""
        pending = sorted(self.root.children, key=lambda c: c.key, reverse=True)
        while pending:
            call = pending.pop()
            if depth is not None and call.depth > depth:
                continue
            yield call
            pending.extend(sorted(call.children, key=lambda c: c.key, reverse=True))

    @staticmethod
    def stays(calls: Iterable[Call]) -> list[tuple[str, list[str]]]:
        """Maximal runs of the walk in one module, with the functions called in each."""
        runs: list[tuple[str, list[str]]] = []
        for call in calls:
            if not runs or runs[-1][0] != call.module:
                runs.append((call.module, []))
            if call.function not in runs[-1][1]:
                runs[-1][1].append(call.function)
        return runs

    @staticmethod
    def climbs(stays: list[tuple[str, list[str]]]) -> list[str]:
        """The stays in a room the walk had already left."""
        seen: set[str] = set()
        climbs = []
        for module, _ in stays:
            if module in seen:
                climbs.append(module)
            seen.add(module)
        return climbs

    def counts(self) -> dict[str, Any]:
        stays = self.stays(self.calls(self.depth))
        climbs = self.climbs(stays)
        # the manifest at any depth: its stays (each one a visit), and who called into it
        everything = list(self.calls(None))
        full = self.stays(everything)
        callers: dict[str, int] = {}
        for call in everything:
            for child in call.children:
                if child.module == MANIFEST and call.module != MANIFEST:
                    where = f"{call.module}:{call.function} -> {child.function}"
                    callers[where] = callers.get(where, 0) + 1
        by_room: dict[str, int] = {}   # calls into the manifest per calling module
        for where, n in callers.items():
            by_room[where.split(":")[0]] = by_room.get(where.split(":")[0], 0) + n
        again = sum(n - 1 for n in by_room.values())
        visits = [i for i, (module, _) in enumerate(full) if module == MANIFEST]
        return {"depth": self.depth, "stays": len(stays), "rooms": len({m for m, _ in stays}), "climbs": len(climbs),
                "climbs_through": sorted(set(climbs)), "manifest_calls": sum(callers.values()),
                "manifest_climbs": again, "manifest_callers": callers, "manifest_stays": len(visits),
                "manifest_between": [f"{full[i - 1][0]} -> {full[i + 1][0] if i + 1 < len(full) else '-'}" for i in visits],
                "walk": stays}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--depth", type=int, default=4, help="rag frames deep that count (default: %(default)s)")
    parser.add_argument("--corpus", nargs="*", default=["docs/filters.md", "docs/retrieval.md"],
                        help="files to index (default: %(default)s)")
    parser.add_argument("--question", default="How is a filter validated?")
    parser.add_argument("--functions", action="store_true", help="also name the functions called in each stay")
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
        with walk.tracing(), contextlib.redirect_stdout(io.StringIO()):
            code = cli.main(ask)
        counts = walk.counts()
        for i, (module, functions) in enumerate(counts.pop("walk"), start=1):
            print(f"{i:3d} {module}" + (f"  ({', '.join(functions)})" if args.functions else ""))
        print(json.dumps({"exit": code, **counts}))
        return code
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
