"""Write a FinanceBench `BenchReport` as a Markdown table, a JSON file and a PNG bar chart.

Example:
    >>> paths = write_report(report, "bench/results", stem="financebench")   # doctest: +SKIP
    >>> sorted(p.suffix for p in paths)                                        # doctest: +SKIP
    ['.json', '.md', '.png']
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from rag.evaluation.financebench_run import BenchReport

__all__ = ["markdown_table", "write_chart", "write_report"]

_LABELS = {"single": "single-document", "shared": "shared store"}


def markdown_table(report: BenchReport) -> str:
    """A Markdown table: one row per configuration, context hit and chunk metrics per setting.

    Example:
        >>> r = BenchReport(results={"single": {"dense": {"context_hit": 0.5, "hit@1": 0.25, "hit@5": 0.5,
        ...     "mrr": 0.3, "context_tokens": 3990.0, "seconds_per_query": 0.01}}}, descriptions={"dense": "d"})
        >>> print(markdown_table(r).splitlines()[2])
        | dense | 50.0% | 25.0% | 50.0% | 0.300 | 3990 |
    """
    settings = list(report.results)
    configs: list[str] = []
    for setting in settings:
        configs += [c for c in report.results[setting] if c not in configs]
    header = ["configuration"]
    for s in settings:
        label = _LABELS.get(s, s)
        header += [f"{label}: context hit", "hit@1", "hit@5", "MRR", "tokens"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name in configs:
        row = [name]
        for s in settings:
            m = report.results[s].get(name)
            row += (["-"] * 5 if m is None else
                    [f"{m['context_hit']:.1%}", f"{m['hit@1']:.1%}", f"{m['hit@5']:.1%}", f"{m['mrr']:.3f}",
                     f"{m['context_tokens']:.0f}"])
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def _markdown(report: BenchReport) -> str:
    meta = report.meta
    parts = [
        "# FinanceBench retrieval results",
        "",
        f"{meta.get('questions', '?')} questions over {meta.get('documents', '?')} filings; context capped at "
        f"{meta.get('budget_tokens', '?')} tokens; chunks of {meta.get('chunk_size', '?')} characters. "
        "*Context hit*: share of questions whose final context contains a gold evidence page. "
        "hit@1 / hit@5 / MRR: by chunk, before context assembly. *tokens*: mean context size.",
        "",
        markdown_table(report),
        "",
        "## Configurations",
        "",
    ]
    parts += [f"- **{name}**: {text}" for name, text in report.descriptions.items()]
    parts += _target_lines(report)
    if meta.get("command"):
        parts += ["", f"Produced by `{meta['command']}`" + (f" in {meta['seconds']:.0f} s." if "seconds" in meta else ".")]
    return "\n".join(parts) + "\n"


def _target_lines(report: BenchReport) -> list[str]:
    """'Targets' section: the best configuration against the targets and the baseline, per setting."""
    targets, best, baseline = report.meta.get("targets"), report.meta.get("best"), report.meta.get("baseline")
    if not targets or not best:
        return []
    lines = ["", "## Targets", ""]
    for setting, target in targets.items():
        scores = report.results.get(setting, {})
        if best not in scores:
            continue
        hit = scores[best]["context_hit"]
        base = scores.get(baseline, {}).get("context_hit")
        verdict = "met" if hit >= target and (base is None or hit > base) else "missed"
        gap = "" if hit >= target else f", {100 * (target - hit):.1f} points short"
        versus = "" if base is None else f"; {baseline}: {base:.1%}"
        lines.append(f"- {_LABELS.get(setting, setting)}: {best} {hit:.1%} (target {target:.0%}{gap}{versus}): {verdict}")
    return lines


def write_chart(report: BenchReport, path: str | Path) -> Path:
    """A grouped bar chart of the context hit rate of every configuration per setting."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    settings = list(report.results)
    configs: list[str] = []
    for setting in settings:
        configs += [c for c in report.results[setting] if c not in configs]
    width = 0.8 / max(len(settings), 1)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(configs) + 2), 4.5))
    for i, setting in enumerate(settings):
        values = [100 * report.results[setting].get(c, {}).get("context_hit", 0.0) for c in configs]
        xs = [j + (i - (len(settings) - 1) / 2) * width for j in range(len(configs))]
        bars = ax.bar(xs, values, width, label=_LABELS.get(setting, setting))
        ax.bar_label(bars, fmt="%.0f", fontsize=7)
    ax.set_xticks(range(len(configs)), configs, rotation=25, ha="right", fontsize=8)
    ax.set_ylabel("questions with a gold page in context (%)")
    ax.set_ylim(0, 105)
    ax.set_title(f"FinanceBench retrieval, {report.meta.get('budget_tokens', '?')}-token context")
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write_report(report: BenchReport, directory: str | Path, *, stem: str = "financebench",
                 chart: bool = True) -> list[Path]:
    """Write `<stem>.md`, `<stem>.json` and (with `chart`) `<stem>.png` into `directory`."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    md = directory / f"{stem}.md"
    js = directory / f"{stem}.json"
    _atomic_write(md, _markdown(report))
    _atomic_write(js, json.dumps(report.to_dict(), indent=2, sort_keys=False) + "\n")
    paths = [md, js]
    if chart:
        paths.append(write_chart(report, directory / f"{stem}.png"))
    return paths


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
