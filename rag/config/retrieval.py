"""The `retrieval:` block of a config: the pipeline's cross-resource stages, validated.

Absent, a config gets the recommended pipeline (`rag.compose.defaults`: fused candidates,
page-diverse packing, a 4,000-token budget). Every stage is settable here; per-resource stages
(search mode, routing, named sections) are keys of the resource itself.

```yaml
retrieval:
  max_tokens: 3000          # the context budget (null: no budget)
  k: 20                     # at most this many chunks (before the budget)
  fetch_k: 40               # candidates per resource and query
  fusion: rrf               # rrf | convex (several resources or queries)
  page_diversity: 0.3       # 0 turns page-diverse packing off
  page_evidence: 0.2        # a chunk's score smoothed with its page's evidence (0: off)
  document_evidence: 0.1    # ... and with its document's (0: off)
  reranker: embedding       # null | embedding (the offline MiniLM reranker)
  rerank_weight: 0.5        # 1: the reranker's order; below 1 blended with the first stage
  rephrase: [keywords]      # keywords | feedback | hyde | multi_query (the last two use the llm)
  expand: 1                 # neighbour chunks on each side (0: none)
  rse: balanced             # a relevant-segment-extraction preset instead of single chunks
```

`pipeline: false` gives the seed's plain RAG instead: each resource's `search_kwargs`, the
results fused, nothing cut.

Example:
    >>> RetrievalConfig(max_tokens=1000, reranker="embedding").settings(llm=None).max_tokens
    1000
    >>> RetrievalConfig(pipeline=False).settings(llm=None) is None
    True
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from rag.compose.defaults import RECOMMENDED, recommended_retrieval
from rag.compose.retrieval_settings import RetrievalSettings
from rag.config.models import StrictModel
from rag.retrieval.rse import RSE_PRESETS

__all__ = ["RetrievalConfig"]

RephraseMode = Literal["keywords", "feedback", "hyde", "multi_query"]


class RetrievalConfig(StrictModel):
    """The `retrieval:` block (see the module docstring); defaults are the recommended pipeline."""

    pipeline: bool = True
    k: int = Field(default=RECOMMENDED["k"], ge=1, le=1000)
    fetch_k: int = Field(default=RECOMMENDED["fetch_k"], ge=1, le=1000)
    fusion: Literal["rrf", "convex"] = RECOMMENDED["fusion"]
    page_diversity: float = Field(default=RECOMMENDED["page_diversity"], ge=0, le=10)
    page_evidence: float = Field(default=RECOMMENDED["page_evidence"], ge=0, le=10)
    document_evidence: float = Field(default=RECOMMENDED["document_evidence"], ge=0, le=10)
    max_tokens: int | None = Field(default=RECOMMENDED["max_tokens"], ge=1, le=1_000_000)
    token_counter: Literal["auto", "minilm", "approx"] = RECOMMENDED["token_counter"]
    reranker: Literal["embedding"] | None = None
    rerank_weight: float = Field(default=1.0, ge=0, le=1)
    rephrase: list[RephraseMode] = Field(default_factory=list)
    expand: int = Field(default=0, ge=0, le=20)
    rse: str | None = None
    rse_overrides: dict[str, float] = Field(default_factory=dict)

    @field_validator("rse")
    @classmethod
    def _check_rse(cls, value: str | None) -> str | None:
        if value is not None and value not in RSE_PRESETS:
            raise ValueError(f"unknown RSE preset {value!r}; valid: {', '.join(RSE_PRESETS)}")
        return value

    def settings(self, *, llm: Any) -> RetrievalSettings | None:
        """The `RetrievalSettings` for `RAG(retrieval=...)`, or None for `pipeline: false`."""
        if not self.pipeline:
            return None
        values = self.model_dump(exclude={"pipeline", "rephrase"})
        if self.rephrase:
            values.update(rephrase=list(self.rephrase), llm=llm)
        return recommended_retrieval(**values)
