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
    answer: str | None = None
    final_answer: str | None = None
    sources: list[dict[str, Any]] = Field(default_factory=list)        # [n] -> {"source", "page", "resource"}
    citations: dict[str, Any] = Field(default_factory=dict)
    support: list[dict[str, Any]] = Field(default_factory=list)        # per answer sentence
    usage: dict[str, dict[str, Any]] = Field(default_factory=dict)     # step -> tokens / cost
    timings: dict[str, float] = Field(default_factory=dict)            # step -> seconds
    extras: dict[str, Any] = Field(default_factory=dict)

    def add_stage(self, name: str, candidates: list[Candidate]) -> None:
        """Record the candidates of a stage (overwrites a stage of the same name)."""
        self.stages[name] = list(candidates)
