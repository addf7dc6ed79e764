"""`RAG`: resources retrieved in parallel, aggregated, answered, plus extras.

```
question ─► RunnableParallel{resource: rephrase, route, search, ...} ─► aggregate (fuse, rerank,
        │      pack, sections, RSE | neighbours | top k, budget) ─► context
        └──────────────────────────────────────────────► generation_chain(question, context) ─► answer
                                                          extras(question, answer, context) ─► ...
```

By default the branches and the aggregate run the recommended pipeline (`RetrievalSettings()`,
see `rag.compose.defaults`): the same one `rag.retrieve`, `airag`, chat, `rag ask`, configs and
`rag serve` run, so every door returns the same context. `retrieval="plain"` gives the seed's
plain top-k: each resource's `search_kwargs` (k 4 by default), fused, nothing cut.

Example:
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> from langchain_core.language_models import FakeListChatModel
    >>> from rag.generation.rag_with_source import rag_chain_from_docs
    >>> docs = Resource.from_texts("docs", ["Rome is in Italy."], embedding=DeterministicFakeEmbedding(size=8))
    >>> rag = RAG(resources=[docs], generation_chain=rag_chain_from_docs(FakeListChatModel(responses=["Italy [1]"])),
    ...           extras={"count_docs": lambda x: len(x["context"])})
    >>> out = rag.chain().invoke("Where is Rome?")
    >>> out["answer"], out["count_docs"], out["context"][0].metadata["resource"]
    ('Italy [1]', 1, 'docs')
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import (
    Runnable,
    RunnableConfig,
    RunnableLambda,
    RunnablePassthrough,
    RunnableSequence,
)
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from rag.base.errors import ConfigError, from_validation
from rag.compose.input_step import aggregate_documents, input_step, normalise_input, resources_chain
from rag.compose.request import (
    BUILD_KEY,
    REQUEST_KEY,
    RagRequest,
    configurable,
    open_request,
    request_of,
    request_settings,
)
from rag.compose.resource import Resource, validate_search_kwargs
from rag.compose.retrieval_settings import RetrievalSettings, retrieval_settings
from rag.compose.retriever import RAGRetriever
from rag.generation.answerer import Answerer
from rag.generation.rag_with_source import GenerationChain, as_generation_chain, rag_chain_from_docs

__all__ = ["OUTPUT_KEYS", "RAG", "aggregate_documents"]

OUTPUT_KEYS = ("question", "answer", "context")
RETRIEVAL_KEYS = ("search_kwargs",)
#: `RAG(retrieval=PLAIN)`: the seed's plain top-k (each resource's search_kwargs, fused, nothing cut).
PLAIN = "plain"


class RAG(BaseModel):
    """Retrieval-augmented generation over named resources.

    Attributes:
        resources: the resources to search; names must be unique.
        retrieval: the retrieval pipeline's settings (`RetrievalSettings` or a dict of its fields:
            `k`, `fetch_k`, `router`, `reranker`, `page_diversity`, `sections`, `rse`,
            `max_tokens`, ...); the default, `RetrievalSettings()`, is the recommended pipeline.
            Each resource's branch rephrases, routes and searches, and the aggregate fuses,
            reranks, packs and budgets (`rag.compose.pipeline`). ``"plain"`` (or None): the seed's
            plain top-k, each branch searching with its `search_kwargs` and the aggregate only fusing.
        generation_chain: `{"question", "context"} -> answer`; default `rag_chain_from_docs()`
            on the configured answerer (`RAG_LLM`, `auto` by default: a configured OpenAI-compatible
            endpoint, a local server, Ollama, else the offline fallback). A custom chain's text goes
            through the same checks (`rag.generation.rag_with_source.as_generation_chain`).
        llm: a LangChain chat model (or LLM) to answer with: shorthand for
            `generation_chain=rag_chain_from_docs(llm)`.
        answerer: an `Answerer` to answer with (`rag.generation.answerer`), the same shorthand.
        extras: `{key: callable(output_dict) -> value}` added to every output.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    resources: list[Resource]
    generation_chain: Runnable = Field(default_factory=rag_chain_from_docs)
    extras: dict[str, Callable[[dict[str, Any]], Any]] = Field(default_factory=dict)
    retrieval: RetrievalSettings | None = Field(default_factory=RetrievalSettings)

    def __init__(self, **data: Any) -> None:
        # llm= / answerer= are shorthands, unless a subclass declares a field of that name (the seed's
        # RerankedRAG has its own `llm`, the judge of its reranker)
        shorthands = [key for key in ("llm", "answerer") if key not in type(self).model_fields]
        given = [key for key in (*shorthands, "generation_chain") if data.get(key) is not None]
        if len(given) > 1:
            raise ConfigError(f"RAG takes one of llm=, answerer= and generation_chain=, got {given}")
        if given and given[0] != "generation_chain":
            data["generation_chain"] = rag_chain_from_docs(data.pop(given[0]))
        for key in shorthands:
            data.pop(key, None)
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise from_validation(exc, type(self).__name__) from None

    @field_validator("resources", mode="before")
    @classmethod
    def _check_resource_types(cls, resources: Any) -> Any:
        if isinstance(resources, list):
            bad = [type(r).__name__ for r in resources if not isinstance(r, Resource)]
            if bad:
                raise ValueError(f"resources must be Resource objects, got {bad}; wrap a knowledge base with "
                                 "kb.as_resource() and a retriever with Resource.from_retriever(name, retriever)")
        return resources

    @field_validator("generation_chain", mode="before")
    @classmethod
    def _check_generation(cls, value: Any) -> Any:
        if isinstance(value, Answerer):   # an answerer is a generation chain's worth: it gets the checks
            return rag_chain_from_docs(value)
        return value

    @field_validator("retrieval", mode="before")
    @classmethod
    def _check_retrieval(cls, value: Any) -> Any:
        if value == PLAIN:
            return None
        if isinstance(value, str):
            raise ValueError(f"unknown retrieval {value!r}; valid: {PLAIN!r}, a RetrievalSettings or a dict of its "
                             "fields")
        return retrieval_settings(**value) if isinstance(value, Mapping) else value

    @field_validator("extras")
    @classmethod
    def _check_extras(cls, extras: dict[str, Callable]) -> dict[str, Callable]:
        clash = sorted(set(extras) & set(OUTPUT_KEYS))
        if clash:
            raise ValueError(f"extras cannot be named {clash}: those output keys are taken by {list(OUTPUT_KEYS)}")
        bad = sorted(k for k, fn in extras.items() if not callable(fn))
        if bad:
            raise ValueError(f"extras {bad} are not callable; each extra is a function of the output dict")
        return extras

    @model_validator(mode="after")
    def _check_resources(self) -> RAG:
        names = [r.name for r in self.resources]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"resource names must be unique; duplicated: {dupes}")
        return self

    @classmethod
    def from_config(cls, source: Any, *, embedding: Any = None, llm: Any = None) -> RAG:
        """Build a RAG (or subclass) from a YAML path, a dict or a `RagConfig` (see `rag.config.rag_config`).

        The chain sits above configuration (pyproject.toml's layers), so this is a downward import; it is
        made when called so that `from rag import RAG` loads no configuration models or stores.
        """
        from rag.config.rag_config import from_config

        return from_config(cls, source, embedding=embedding, llm=llm)

    def describe_answerer(self) -> str:
        """Which model answers, in one line (what `rag ask`, `rag serve` and `/health` print)."""
        return as_generation_chain(self.generation_chain).describe()

    @property
    def resource_names(self) -> list[str]:
        return [r.name for r in self.resources]

    @property
    def resources_retrieval_chain(self) -> Runnable[str, list[Document]]:
        """One parallel branch per resource, then the aggregate (`rag.compose.input_step.resources_chain`, where
        the input step that runs it is). Override to customise retrieval."""
        return resources_chain(self)

    def settings_for(self, config: RunnableConfig | None) -> RetrievalSettings | None:
        """The pipeline settings a run with `config` uses (`rag.compose.request`); None for a plain RAG."""
        found = request_of(config)
        return found.settings if found is not None else request_settings(self.retrieval, config)

    def open_request(self, value: Any, config: RunnableConfig | None, *,
                     defaults: Mapping[str, Any] | None = None) -> RagRequest:
        """Resolve and validate one request (`RagRequest`): what the chain's input step does once per request.

        `value` is the chain's input (a question or `{"question": ...}`); `defaults` the build-time
        per-resource settings (`chain(retrieval_chain=...)`, validated), else those in the config.

        Raises:
            InputError: no question. ConfigError: a bad setting (the message lists the valid ones).
        """
        question = normalise_input(value)["question"]
        values = configurable(config)
        build = defaults if defaults is not None else values.get(BUILD_KEY) or {}
        given = self.validate_retrieval_settings(values.get(REQUEST_KEY))
        per_resource = {name: {**((build.get(name) or {}).get("search_kwargs") or {}),
                               **((given.get(name) or {}).get("search_kwargs") or {})} for name in self.resource_names}
        return open_request(question, self.retrieval, config, per_resource)

    def request_for(self, question: str, config: RunnableConfig | None) -> RagRequest:
        """The run's `RagRequest` (the one the chain's input step resolved), else one resolved now (a stage
        called directly, e.g. `resources_retrieval_chain.invoke`)."""
        found = request_of(config)
        return found if found is not None else self.open_request(question, config)

    def as_retriever(self, *, k: int | None = None, filter: dict[str, Any] | None = None, principal: Any = None,
                     public_by_default: bool = False) -> BaseRetriever:
        """This RAG's aggregated retrieval as a LangChain retriever (see `RAGRetriever`).

        `principal` (a `rag.base.acl.Principal` or `{id, groups, roles}`): every call searches only the
        chunks it may read, as the chain does with `configurable["principal"]` (which a call's config may
        also carry); `public_by_default`: chunks without permissions are visible to it too.
        """
        return RAGRetriever(rag=self, k=k, filter=filter, principal=principal, public_by_default=public_by_default)

    # ------------------------------------------------------------------ settings
    def validate_retrieval_settings(self, settings: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
        """Check `{resource: {"search_kwargs": {...}}}`; unknown names or keys raise `ConfigError`."""
        if not settings:
            return {}
        if not isinstance(settings, Mapping):
            raise ConfigError(f"retrieval_chain must be a dict of resource name -> settings, got {type(settings).__name__}")
        valid = self.resource_names
        out: dict[str, dict[str, Any]] = {}
        for name, spec in settings.items():
            if name not in valid:
                raise ConfigError(f"unknown resource {name!r} in retrieval_chain; valid: {', '.join(valid) or '(none)'}")
            if not isinstance(spec, Mapping):
                raise ConfigError(f"retrieval_chain[{name!r}] must be a dict like {{'search_kwargs': {{'k': 4}}}}")
            unknown = sorted(set(spec) - set(RETRIEVAL_KEYS))
            if unknown:
                raise ConfigError(f"unknown key(s) {unknown} in retrieval_chain[{name!r}]; valid: {', '.join(RETRIEVAL_KEYS)}")
            out[name] = {"search_kwargs": validate_search_kwargs(spec.get("search_kwargs"),
                                                                 where=f"retrieval_chain[{name!r}].search_kwargs")}
        return out

    def _generation_with(self, settings: Mapping[str, Any] | None) -> Runnable:
        if not settings:
            return self.generation_chain
        if isinstance(self.generation_chain, GenerationChain):
            return self.generation_chain.with_settings(**settings)
        valid = [spec.id for spec in self.generation_chain.config_specs]
        unknown = sorted(set(settings) - set(valid))
        if unknown:
            raise ConfigError(f"unknown generation setting(s) {unknown} for {type(self.generation_chain).__name__}; "
                              f"valid: {', '.join(valid) or '(none: build it with rag_chain_from_docs or configurable_fields)'}")
        return self.generation_chain.with_config(configurable=dict(settings))

    # ------------------------------------------------------------------ the chain
    def chain(self, retrieval_chain: dict[str, Any] | None = None,
              generation_chain: dict[str, Any] | None = None) -> RunnableSequence:
        """Build the runnable: `question -> {"question", "answer", "context", <extras>}`.

        Per request, `config={"configurable": {...}}` (or `chain.with_config(configurable=...)`)
        sets `k`, `fetch_k`, `filter`, `max_tokens` and `retrieval_chain`; `chain.config_specs`
        lists them (`rag.compose.request`).

        Args:
            retrieval_chain: per-resource settings, e.g. `{"docs": {"search_kwargs": {"k": 10,
                "filter": {"year": {"$gt": 2024}}}}}` (that resource's top 10, filtered). At call
                time the same dict can be passed as `config={"configurable": {"retrieval_chain":
                {...}}}`; its search settings win.
            generation_chain: generation settings (`temperature`, `max_tokens`, `prompt`, `llm`).
        """
        first = self.retrieval_step(retrieval_chain)   # built in the order they run
        generation = as_generation_chain(self._generation_with(generation_chain))
        steps: list[Runnable] = [first, RunnablePassthrough.assign(answer=generation).with_config(run_name="generate")]
        if self.extras:
            extras = {key: RunnableLambda(fn, name=key) for key, fn in self.extras.items()}
            steps.append(RunnablePassthrough.assign(**extras).with_config(run_name="extras"))
        return RunnableSequence(*steps, name=type(self).__name__)

    def retrieval_step(self, retrieval_chain: dict[str, Any] | None = None) -> Runnable[Any, dict[str, Any]]:
        """The chain's input step: `question -> {"question", "context", <other input keys>}`.

        It checks the input and resolves the request once (`open_request`: a `RagRequest` every stage
        reads from the config, trusting it), then runs `resources_retrieval_chain`. Every door enters
        here: `chain()` is this step, then generation; `retrieve`, `airag` and MCP `search` run it alone.

        Args:
            retrieval_chain: build-time per-resource settings, as for `chain`.
        """
        return input_step(self, self.validate_retrieval_settings(retrieval_chain))

    def get_chain(self, retrieval_chain: dict[str, Any] | None = None,
                  generation_chain: dict[str, Any] | None = None) -> RunnableSequence:
        """Same as `chain` (the seed uses both names)."""
        return self.chain(retrieval_chain=retrieval_chain, generation_chain=generation_chain)
