"""How long does the CLI take to start? A no-op `rag index` and `rag ask`, each in a fresh process.

Builds two knowledge bases of `docs/` once (the default MiniLM embedding, and
`--embedding fake`); with `--copies N`, of N copies of `docs/` (in folders copy1 ... copyN; the
knowledge base's embedding cache embeds each distinct chunk once), which makes a knowledge base of
about N x 505 chunks: `--copies 10` is the ~5,000 chunks `rag ask` is held to (<= 3 s). Then it
runs, alternating, N times each:

- `python -m rag.cli index docs` on the MiniLM store (nothing changed: a no-op),
- `python -m rag.cli ask QUESTION` on the MiniLM store,
- `python -m rag.cli ask QUESTION` on the fake-embedding store,

and prints the median and min wall time and CPU time (user + system of the child) per command
next to the targets (no-op index <= 1.5 s, ask <= 3 s wall on a warm machine), whether torch was
imported, and an import-time breakdown (`python -X importtime`: the top-level imports by
cumulative time). The load average is printed too: on a shared machine wall time grows with it,
CPU time much less.

    python bench/startup.py [--runs 5] [--top 12] [--copies 10] [--store /tmp/rag-startup] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUESTION = "Which embedding model is used by default?"
TARGETS = {"index (no-op)": 1.5, "ask": 3.0, "ask (fake store)": 3.0}
_IMPORT_LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")
# A child prints this after the command when torch was imported (see _PROBE).
_PROBE = ("import runpy, sys, atexit; "
          "atexit.register(lambda: print('TORCH-IMPORTED' if 'torch' in sys.modules else 'torch-not-imported', "
          "file=sys.stderr)); sys.argv = ['rag', *sys.argv[1:]]; runpy.run_module('rag.cli', run_name='__main__')")


def _env() -> dict[str, str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "ANONYMIZED_TELEMETRY": "False"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    return env


def run(args: list[str], *, importtime: bool = False) -> tuple[float, float, str, str]:
    """Run `python -c PROBE ARGS` (the CLI); returns wall s, child CPU s, stdout, stderr."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    flags = ["-X", "importtime"] if importtime else []
    proc = subprocess.run([sys.executable, *flags, "-c", _PROBE, *args], capture_output=True, text=True,
                          env=_env(), cwd=ROOT, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return wall, cpu, proc.stdout, proc.stderr


def commands(store: Path, fake: Path, corpus: str = "docs") -> dict[str, list[str]]:
    ask = ["ask", QUESTION, "--collection", "docs"]
    return {"index (no-op)": ["index", corpus, "--store", str(store), "--collection", "docs"],
            "ask": [*ask, "--store", str(store)],
            "ask (fake store)": [*ask, "--store", str(fake)]}


def _copies(folder: Path, n: int) -> Path:
    """`n` copies of docs/ (Markdown only), each under its own folder, so every copy is its own document."""
    for i in range(1, n + 1):
        target = folder / f"copy{i}"
        if not target.is_dir():
            shutil.copytree(ROOT / "docs", target, ignore=shutil.ignore_patterns("notebooks"))
    return folder


def import_breakdown(stderr: str, top: int) -> list[tuple[str, float]]:
    """The top-level imports (nesting depth 0) by cumulative seconds, largest first."""
    rows = []
    for line in stderr.splitlines():
        match = _IMPORT_LINE.match(line)
        if match and len(match.group(3)) == 1:  # one space before the name: imported by the program itself
            rows.append((match.group(4), int(match.group(2)) / 1e6))
    total = sum(seconds for _, seconds in rows)
    return [("(all imports)", total), *sorted(rows, key=lambda r: -r[1])[:top]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="runs per command (default: %(default)s)")
    parser.add_argument("--top", type=int, default=12, help="imports listed per command (default: %(default)s)")
    parser.add_argument("--store", default=None, help="where the two stores go (default: a temporary folder)")
    parser.add_argument("--json", default=None, help="also write the figures to this JSON file")
    parser.add_argument("--copies", type=int, default=1,
                        help="index this many copies of docs/ (default: %(default)s; 10 makes ~5,000 chunks)")
    args = parser.parse_args()
    base = Path(args.store or tempfile.mkdtemp(prefix="rag-startup-"))
    store, fake = base / "minilm", base / "fake"
    corpus = "docs" if args.copies == 1 else str(_copies(base / "corpus", args.copies))
    for path, extra in ((store, []), (fake, ["--embedding", "fake"])):
        existed = path.is_dir()
        wall, _, _, err = run(["index", corpus, "--store", str(path), "--collection", "docs", *extra])
        total = re.search(r"([\d,]+) chunk\(s\) in total", err)
        print(f"{path}: {'brought up to date' if existed else 'built'} in {wall:.1f} s; "
              f"{total.group(1) if total else '?'} chunks")
    cmds = commands(store, fake, corpus)
    load_before = os.getloadavg()
    for argv in cmds.values():  # warm the page cache and the bytecode caches
        run(argv)
    walls: dict[str, list[float]] = {name: [] for name in cmds}
    cpus: dict[str, list[float]] = {name: [] for name in cmds}
    torch_seen: dict[str, bool] = {}
    for _ in range(args.runs):
        for name, argv in cmds.items():  # alternating, so load changes hit every command alike
            wall, cpu, _, err = run(argv)
            walls[name].append(wall)
            cpus[name].append(cpu)
            torch_seen[name] = torch_seen.get(name, False) or "TORCH-IMPORTED" in err
    load_after = os.getloadavg()
    print(f"\nload average (1 min) {load_before[0]:.1f} before, {load_after[0]:.1f} after; "
          f"{os.cpu_count()} CPUs; {args.runs} runs per command")
    print(f"{'command':18s} {'wall median':>11s} {'wall min':>9s} {'CPU median':>10s} {'target':>7s}  torch")
    report: dict[str, object] = {"load_before": load_before[0], "load_after": load_after[0], "runs": args.runs}
    for name in cmds:
        wall_med, cpu_med = statistics.median(walls[name]), statistics.median(cpus[name])
        print(f"{name:18s} {wall_med:10.2f}s {min(walls[name]):8.2f}s {cpu_med:9.2f}s {TARGETS[name]:6.1f}s  "
              f"{'imported' if torch_seen[name] else 'not imported'}")
        report[name] = {"wall": walls[name], "cpu": cpus[name], "torch": torch_seen[name]}
    for name, argv in cmds.items():
        _, _, _, err = run(argv, importtime=True)
        print(f"\nimport time, {name} (python -X importtime; cumulative, top-level imports):")
        for module, seconds in import_breakdown(err, args.top):
            print(f"  {seconds:6.3f} s  {module}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
