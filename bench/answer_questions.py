"""Pick the FinanceBench questions the answer benchmark (`bench/answers.py`) asks.

A question is kept when its gold answer holds a number that

- has at least two significant digits ("2,018", "13.2", "42"; not "0.9" or "5"),
- is not a year (1900-2099 written as four digits) nor a date's day ("January 28, 2023"),
- is not in the question itself (else an answer could get it by echoing the question), and
- is found verbatim in the gold evidence text, as a whole number (not inside a longer one).

The first such number is the question's target: `bench/answers.py` counts an answer as right when
it contains that number verbatim. The ids are written to `bench/answer_questions.json`:

    python bench/answer_questions.py            # writes bench/answer_questions.json, prints the selection
"""

from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = os.environ.get("RAG_FINANCEBENCH_DIR", "../shared/data/financebench")   # as `rag eval financebench`
IDS_PATH = ROOT / "bench/answer_questions.json"

_NUMBER = re.compile(r"(?<![\w.,])\d[\d,]*(?:\.\d+)?")   # "$2,018mn" holds 2,018
_YEAR = re.compile(r"(?:19|20)\d\d")
_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?"


def _clean(number: str) -> str:
    return number.rstrip(",.")


def contains_number(text: str, number: str) -> bool:
    """True when `number` occurs in `text` as a whole number ("2,018" is not inside "12,018" or "2,018.5")."""
    return re.search(r"(?<![\d.,])" + re.escape(number) + r"(?![\d]|[.,]\d)", text) is not None


def target_number(question: dict) -> str | None:
    """The question's target number (see the module docstring), or None when it has none."""
    evidence = " ".join(e.get("evidence_text") or "" for e in question.get("evidence", []))
    answer = question.get("answer") or ""
    for match in _NUMBER.finditer(answer):
        number = _clean(match.group())
        significant = re.sub(r"\D", "", number).lstrip("0")
        if len(significant) < 2 or _YEAR.fullmatch(number) or _is_day(answer, match.start()):
            continue
        if contains_number(question["question"], number) or not contains_number(evidence, number):
            continue
        return number
    return None


def _is_day(text: str, start: int) -> bool:
    """Whether the number at `start` is a date's day ("January 28, 2023", "28 January 2023")."""
    before, after = text[max(0, start - 12):start], text[start:start + 20]
    return bool(re.search(rf"\b{_MONTH}\s+$", before, re.IGNORECASE) or
                re.match(rf"\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTH}", after, re.IGNORECASE))


def load_questions(data_dir: str | Path) -> list[dict]:
    """All questions of the data set, as dicts (see the data set's README for the fields)."""
    path = Path(data_dir) / "questions.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def selected_questions(data_dir: str | Path, ids_path: str | Path = IDS_PATH) -> list[tuple[dict, str]]:
    """The committed selection: (question, target number) in the order of the ids file."""
    ids = json.loads(Path(ids_path).read_text(encoding="utf-8"))
    by_id = {q["financebench_id"]: q for q in load_questions(data_dir)}
    missing = [i for i in ids if i not in by_id]
    if missing:
        raise SystemExit(f"{len(missing)} selected id(s) are not in {data_dir}: {missing[:3]}")
    out = []
    for i in ids:
        number = target_number(by_id[i])
        if number is None:
            raise SystemExit(f"{i} no longer has a target number; re-run bench/answer_questions.py")
        out.append((by_id[i], number))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=DEFAULT_DATA)
    parser.add_argument("--out", default=str(IDS_PATH))
    args = parser.parse_args(argv)
    chosen = [(q, n) for q in load_questions(args.data) if (n := target_number(q)) is not None]
    for q, number in chosen:
        print(f"{q['financebench_id']}  {number:>8}  {q['doc_name']:32s}  {q['question'][:70]}")
    Path(args.out).write_text(json.dumps([q["financebench_id"] for q, _ in chosen], indent=1) + "\n", encoding="utf-8")
    print(f"{len(chosen)} question(s), {len({q['doc_name'] for q, _ in chosen})} filing(s) -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
