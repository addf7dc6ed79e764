"""`RAGResult`: every intermediate step of one retrieval + generation run, for inspection.

In the spirit of RAGTools.jl's RAGResult: the question and its rephrasings, the candidates at
each stage with their scores, the final context, the answer before and after refinement, and
per-step timings. `rag.retrieve` fills the retrieval part, `rag.generate` / `rag.airag` the rest.

Example:
    >>> from langchain_core.documents import Document
    >>> r = RAGResult(question="q")
    >>> r.add_stage("dense", [Candidate(document=Document(page_content="x"), score=0.9, resource="docs")])
    >>> r.stages["dense"][0].score
    0.9
"""

from __future__ import annotations

from typing import Any

from langchain_core.documents import Document
from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Candidate", "RAGResult", "Segment"]


class Candidate(BaseModel):
    """A chunk at some stage of retrieval, with its score there and per-retriever scores."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    document: Document
    score: float | None = None
    resource: str | None = None
    scores: dict[str, float] = Field(default_factory=dict)   # e.g. {"dense": 0.71, "bm25": 12.3, "rrf": 0.03}


class Segment(BaseModel):
    """A run of consecutive chunks of one document chosen by Relevant Segment Extraction."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    doc_id: str
    start: int            # first chunk_index, inclusive
    end: int              # last chunk_index, exclusive
    score: float
    text: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)


class RAGResult(BaseModel):
    """What happened in one run. Fields are filled by the steps that ran; the rest stay empty."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    question: str
    rephrased_questions: list[str] = Field(default_factory=list)
    stages: dict[str, list[Candidate]] = Field(default_factory=dict)   # stage name -> candidates, in order
    segments: list[Segment] = Field(default_factory=list)
    context: list[Document] = Field(default_factory=list)
    answer: Any = None           # the generation's answer: a str, or an `Answer` (a str with its fields)
    final_answer: Any = None     # after refinement and the checks: the `Answer` every door returns
    sources: list[dict[str, Any]] = Field(default_factory=list)        # [n] -> {"source", "page", "resource"}
    citations: dict[str, Any] = Field(default_factory=dict)
    support: list[dict[str, Any]] = Field(default_factory=list)        # per answer sentence
    usage: dict[str, dict[str, Any]] = Field(default_factory=dict)     # step -> tokens / cost
    timings: dict[str, float] = Field(default_factory=dict)            # step -> seconds
    extras: dict[str, Any] = Field(default_factory=dict)
    standalone_question: str | None = None                             # chat: the condensed question
    flags: list[str] = Field(default_factory=list)                     # post-check findings, e.g. "unsupported_sentences"

    def add_stage(self, name: str, candidates: list[Candidate]) -> None:
        """Record the candidates of a stage (overwrites a stage of the same name)."""
        self.stages[name] = list(candidates)

    def total_usage(self) -> dict[str, Any]:
        """Tokens and cost summed over all steps; the cost is None if any step's price is unknown.

        Example:
            >>> r = RAGResult(question="q", usage={"answer": {"input_tokens": 3, "output_tokens": 2,
            ...                                              "total_tokens": 5, "cost": 0.0}})
            >>> r.total_usage()["total_tokens"]
            5
        """
        total: dict[str, Any] = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0, "cost": 0.0}
        for step in self.usage.values():
            for key in ("input_tokens", "output_tokens", "total_tokens"):
                total[key] += int(step.get(key, 0) or 0)
            step_cost = step.get("cost", 0.0)
            total["cost"] = None if total["cost"] is None or step_cost is None else total["cost"] + step_cost
        return total

    @property
    def support_score(self) -> float | None:
        """Mean support score of the answer's claim sentences (None without support annotations)."""
        claims = [s for s in self.support if s.get("label") != "no_answer"]
        return round(sum(float(s.get("score", 0.0)) for s in claims) / len(claims), 4) if claims else None
