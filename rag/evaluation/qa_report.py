"""The markdown report (with a PNG bar chart) of a QA evaluation run.

Example:
    >>> report = QAEvalReport(k=5, metrics={"mrr": 0.5, "questions": 2.0}, rows=[])   # doctest: +SKIP
    >>> write_qa_report(report, "eval-report/")                                        # doctest: +SKIP
    PosixPath('eval-report/report.md')
"""

from __future__ import annotations

from pathlib import Path

from rag.base.errors import MissingDependencyError
from rag.evaluation.qa_evals import QAEvalReport

__all__ = ["CHART_FILE", "REPORT_FILE", "require_chart", "write_qa_report"]

REPORT_FILE = "report.md"
CHART_FILE = "qa_metrics.png"
_SCORES = ("hit_rate@", "mrr", "ndcg@", "answer_support", "citation_precision", "citation_recall",
           "answer_correctness")


def _fmt(value: object) -> str:
    if value is None:
        return "n/a"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def require_chart() -> None:
    """Raise `MissingDependencyError` now, before any work, when the chart's matplotlib is not installed."""
    try:
        import matplotlib  # noqa: F401 - imported to see that it is there
    except ImportError as exc:
        raise MissingDependencyError.for_extra("matplotlib", "eval", "rag eval qa (its report chart)") from exc


def _chart(report: QAEvalReport, path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise MissingDependencyError.for_extra("matplotlib", "eval", "The QA report chart") from exc
    names = [n for n, v in report.metrics.items() if v is not None and n.startswith(_SCORES)]
    values = [report.metrics[n] for n in names]
    fig, ax = plt.subplots(figsize=(7, 3.2))
    bars = ax.bar(names, values, color="#4c72b0")
    ax.bar_label(bars, fmt="%.2f", fontsize=8)
    ax.set_ylim(0, 1.1)
    ax.set_title(f"QA evaluation ({int(report.metrics.get('questions') or 0)} questions, k={report.k})")
    ax.tick_params(axis="x", labelrotation=30, labelsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_qa_report(report: QAEvalReport, out_dir: str | Path, *, title: str = "QA evaluation",
                    max_rows: int = 50) -> Path:
    """Write `report.md` and `qa_metrics.png` into `out_dir`; returns the markdown path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    _chart(report, out / CHART_FILE)
    lines = [f"# {title}", "", f"![metrics]({CHART_FILE})", "", "| metric | value |", "|---|---|"]
    lines += [f"| {name} | {_fmt(value)} |" for name, value in report.metrics.items()]
    lines += ["", "Retrieval metrics count a chunk as relevant when it is the question's source chunk or "
              "contains the reference answer. Support and citation scores come from `annotate_support` "
              "and `check_citations`.", "", "## Questions", "",
              "| id | question | hit | RR | support | cit. P | cit. R | flags |", "|---|---|---|---|---|---|---|---|"]
    for row in report.rows[:max_rows]:
        question = row["question"].replace("|", "\\|")
        lines.append(f"| {row['id']} | {question} | {_fmt(row['hit'])} | {_fmt(row['rr'])} | {_fmt(row['support'])} "
                     f"| {_fmt(row['citation_precision'])} | {_fmt(row['citation_recall'])} | "
                     f"{', '.join(row['flags']) or '-'} |")
    if len(report.rows) > max_rows:
        lines.append(f"\n({len(report.rows) - max_rows} more questions not shown)")
    path = out / REPORT_FILE
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
