"""FinanceBench retrieval benchmark: `python bench/financebench.py [options]`.

The same as `rag eval financebench` (see `--help`): parses the filings once, embeds the chunks once
(both cached under bench/results/cache/), runs every retrieval configuration in the single-document
and shared-store settings, prints one line per configuration and writes bench/results/financebench.
{md,json,png}. Data: ../shared/data/financebench, or --data, or $RAG_FINANCEBENCH_DIR.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    """Run `rag eval financebench` with the default paths resolved against the project root."""
    sys.path.insert(0, str(ROOT))
    from rag.cli import main as cli_main
    from rag.evaluation.financebench import DATA_ENV_VAR, DEFAULT_DATA_DIR

    args = list(sys.argv[1:] if argv is None else argv)
    given = {a.split("=", 1)[0] for a in args if a.startswith("--")}
    defaults = {"--cache-dir": ROOT / "bench/results/cache", "--out": ROOT / "bench/results"}
    if not os.environ.get(DATA_ENV_VAR):
        defaults["--data"] = ROOT / DEFAULT_DATA_DIR
    for flag, value in defaults.items():
        if flag not in given:
            args += [flag, str(value)]
    return cli_main(["eval", "financebench", *args])


if __name__ == "__main__":
    sys.exit(main())
