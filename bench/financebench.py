"""FinanceBench retrieval benchmark: `python bench/financebench.py [options]`.

The same as `rag eval financebench` (see `--help`): indexes the filings once into knowledge bases
through the library and embeds the chunks once (both kept under bench/results/cache/), runs every retrieval configuration in the single-document
and shared-store settings, prints one line per configuration and writes bench/results/financebench.
{md,json,png}. Data: ../shared/data/financebench, or --data, or $RAG_FINANCEBENCH_DIR.

`--filings NAME,NAME,...` (or `--filings @FILE`, one name a line) runs on a subset: the named
filings and every question about them, copied into a data directory of their own (under
--cache-dir, as `subset-<hash>`), so the shared store holds those filings only. Give --out (and a
--cache-dir of its own) so a subset run does not replace the full results.

Example (the subset used for the table finder in docs/indexing.md):
    python bench/financebench.py --configs default --filings @bench/financebench_tables_subset.txt \
        --cache-dir /tmp/fb-cache --out /tmp/fb-out --no-chart
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def subset_data(data: Path, names: list[str], into: Path) -> Path:
    """A FinanceBench data directory holding only the filings `names` (copies) and the full question files.

    The questions about other filings are dropped when it is read (`FinanceBenchData.load` keeps the
    questions whose PDF exists).
    """
    missing = [n for n in names if not (data / "pdfs" / f"{n}.pdf").exists()]
    if missing:
        raise SystemExit(f"--filings: no PDF for {', '.join(missing)} in {data / 'pdfs'}")
    key = hashlib.sha256("\n".join(sorted(names)).encode()).hexdigest()[:10]
    root = into / f"subset-{key}"
    (root / "pdfs").mkdir(parents=True, exist_ok=True)
    for name in names:
        target = root / "pdfs" / f"{name}.pdf"
        if not target.exists():
            shutil.copyfile(data / "pdfs" / f"{name}.pdf", target)
    for name in ("questions.jsonl", "documents.jsonl"):
        if (data / name).exists():
            shutil.copyfile(data / name, root / name)
    return root


def _filings(value: str) -> list[str]:
    text = Path(value[1:]).read_text() if value.startswith("@") else value.replace(",", "\n")
    return [line.split("#")[0].strip() for line in text.splitlines() if line.split("#")[0].strip()]


def main(argv: list[str] | None = None) -> int:
    """Run `rag eval financebench` with the default paths resolved against the project root."""
    sys.path.insert(0, str(ROOT))
    from rag.cli import main as cli_main
    from rag.evaluation.financebench import DATA_ENV_VAR, DEFAULT_DATA_DIR, resolve_data_dir

    args = list(sys.argv[1:] if argv is None else argv)
    filings = None
    for flag in [a for a in args if a == "--filings" or a.startswith("--filings=")]:
        at = args.index(flag)
        value = flag.split("=", 1)[1] if "=" in flag else args.pop(at + 1)
        args.pop(at)
        filings = _filings(value)
    given = {a.split("=", 1)[0] for a in args if a.startswith("--")}
    defaults = {"--cache-dir": ROOT / "bench/results/cache", "--out": ROOT / "bench/results"}
    if not os.environ.get(DATA_ENV_VAR):
        defaults["--data"] = ROOT / DEFAULT_DATA_DIR
    for flag, value in defaults.items():
        if flag not in given:
            args += [flag, str(value)]
    if filings is not None:
        at = args.index("--data") if "--data" in args else None
        data = resolve_data_dir(args[at + 1] if at is not None else None)
        cache = Path(args[args.index("--cache-dir") + 1])
        subset = subset_data(data, filings, cache)
        if at is not None:
            args[at + 1] = str(subset)
        else:
            args += ["--data", str(subset)]
    return cli_main(["eval", "financebench", *args])


if __name__ == "__main__":
    sys.exit(main())
