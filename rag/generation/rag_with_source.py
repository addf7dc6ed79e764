"""The generation chain: `{"question", "context"} -> Answer`, one answerer and the checks, for every door.

`rag_chain_from_docs(llm)` is the seed's name for it. The chain asks its `Answerer` (an LLM behind
`LLMAnswerer`, the offline fallback, or a user's own) for a draft, then runs the one
post-processing step (`rag.checks.postprocess.finalise`): dangling `[n]` removed, each
sentence's support marked, flags raised, and, with `on_unsupported="refuse"`, an answer that cites
nothing or that its sources do not support replaced by a refusal. Streaming yields the answerer's
text as it comes; the final `Answer` (the same one `invoke` returns) is handed to a sink in the
run's config (`ANSWER_SINK`), which `stream_events` reads for its closing events.

Example:
    >>> from langchain_core.documents import Document
    >>> from langchain_core.language_models import FakeListChatModel
    >>> chain = rag_chain_from_docs(llm=FakeListChatModel(responses=["Paris [1] [4]"]), checks_embedding=None)
    >>> out = chain.invoke({"question": "Where?", "context": [Document(page_content="Paris.")]})
    >>> out, out.cited, out.invalid
    ('Paris [1]', [1], [4])
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.prompts import BasePromptTemplate
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.config import ensure_config
from langchain_core.runnables.utils import Input

from rag.base.errors import ConfigError, InputError
from rag.base.text import neutralise_citation_markers
from rag.base.answer import Answer, as_answer
from rag.generation.answerer import Answerer, RunnableAnswerer
from rag.generation.factory import LLMLike, answerer_for
from rag.checks.postprocess import ON_UNSUPPORTED, finalise

__all__ = ["ANSWER_SINK", "GENERATION_SETTINGS", "GenerationChain", "as_generation_chain", "rag_chain_from_docs"]

#: The per-call settings `RAG.chain(generation_chain={...})` accepts for a `GenerationChain`.
GENERATION_SETTINGS = ("prompt", "temperature", "max_tokens", "llm", "on_unsupported")
#: A list under this `configurable` key receives the final `Answer` of a streamed run.
ANSWER_SINK = "rag_answer_sink"


def _question_and_context(input: Any) -> tuple[str, list[Document]]:
    """The question, and the context as the answerer and the checks read it: citation markers already in a
    document's text ("... of France.[2]") are neutralised (`[^2]`), so only the answerer's own cite sources."""
    if not isinstance(input, Mapping) or "question" not in input:
        raise InputError("the generation chain takes a dict with 'question' and 'context' (a list of Documents)")
    context = input.get("context") or []
    if isinstance(context, str):
        context = [Document(page_content=context)]
    return str(input["question"]), [_neutralised(doc) for doc in context]


def _neutralised(doc: Document) -> Document:
    text = neutralise_citation_markers(doc.page_content)
    return doc if text == doc.page_content else Document(page_content=text, metadata=doc.metadata, id=doc.id)


class GenerationChain(Runnable[dict, Answer]):
    """One answerer and the checks (see the module docstring); build it with `rag_chain_from_docs()`.

    Args:
        llm: an `Answerer`, a chat model / LLM (behind `LLMAnswerer`), or None for `RAG_LLM`'s choice.
        prompt: the LLM's prompt (`{question}`, `{context}`).
        on_unsupported: "flag" keeps an unsupported or uncited answer and flags it; "refuse" replaces it.
        checks_embedding: the embedding of the support checks (`"default"`, an Embeddings, or None: lexical).
    """

    def __init__(self, llm: LLMLike = None, prompt: BasePromptTemplate | str | None = None, *,
                 on_unsupported: str = "flag", checks_embedding: Embeddings | str | None = "default",
                 context_window: int | None = None) -> None:
        if on_unsupported not in ON_UNSUPPORTED:
            raise ConfigError(f"on_unsupported must be one of {ON_UNSUPPORTED}, got {on_unsupported!r}")
        self.answerer: Answerer = answerer_for(llm, prompt, context_window=context_window)
        self.prompt = prompt
        self.context_window = context_window
        self.on_unsupported = on_unsupported
        self.checks_embedding = checks_embedding

    @property
    def llm(self) -> Any:
        """The chat model answering, or the answerer itself when no model does (the seed's attribute)."""
        return self.answerer.model if self.answerer.model is not None else self.answerer

    def __repr__(self) -> str:
        return f"GenerationChain({self.answerer!r})"

    def describe(self) -> str:
        """Which model answers, in one line."""
        return self.answerer.describe()

    def get_name(self, suffix: str | None = None, *, name: str | None = None) -> str:
        return name or ("answer" + (suffix or ""))

    def with_settings(self, **settings: Any) -> GenerationChain:
        """A copy with other settings: `prompt`, `llm`, `temperature`, `max_tokens`, `on_unsupported`.

        Raises:
            ConfigError: for an unknown setting, listing the valid ones.
        """
        unknown = sorted(set(settings) - set(GENERATION_SETTINGS))
        if unknown:
            raise ConfigError(f"unknown generation setting(s) {unknown}; valid: {', '.join(GENERATION_SETTINGS)}")
        llm = settings.get("llm", self.llm)
        model_params = {k: settings[k] for k in ("temperature", "max_tokens") if k in settings}
        if model_params and not isinstance(llm, Answerer):
            llm = _with_model_params(llm, model_params)
        return GenerationChain(llm, settings.get("prompt", self.prompt),
                               on_unsupported=settings.get("on_unsupported", self.on_unsupported),
                               checks_embedding=self.checks_embedding, context_window=self.context_window)

    def with_checks(self, embedding: Any) -> GenerationChain:
        """A copy whose support checks use `embedding` (None: lexical only)."""
        copy = GenerationChain(self.answerer, on_unsupported=self.on_unsupported, checks_embedding=embedding)
        copy.prompt, copy.context_window = self.prompt, self.context_window
        return copy

    def finish(self, draft: Any, question: str, context: Sequence[Document]) -> Answer:
        """The final answer of a draft: the checks and the refusal setting (`finalise`)."""
        draft = as_answer(draft, answerer=self.answerer.describe())
        return finalise(draft, question, context, embedding=self.checks_embedding,
                        on_unsupported=self.on_unsupported)

    # ------------------------------------------------------------------ Runnable
    def invoke(self, input: Input, config: RunnableConfig | None = None, **kwargs: Any) -> Answer:
        def run(value: Any, config: RunnableConfig) -> Answer:
            question, context = _question_and_context(value)
            return self.finish(self.answerer.answer(question, context, config), question, context)

        return self._call_with_config(run, input, config, run_type="llm")

    async def ainvoke(self, input: Input, config: RunnableConfig | None = None, **kwargs: Any) -> Answer:
        async def run(value: Any, config: RunnableConfig) -> Answer:
            question, context = _question_and_context(value)
            draft = await self.answerer.aanswer(question, context, config)
            return await asyncio.to_thread(self.finish, draft, question, context)

        return await self._acall_with_config(run, input, config, run_type="llm")

    def stream(self, input: Input, config: RunnableConfig | None = None, **kwargs: Any) -> Iterator[str]:
        config = ensure_config(config)
        question, context = _question_and_context(input)
        pieces: list[str] = []
        draft: Answer | None = None
        for piece in self.answerer.stream(question, context, config):
            if isinstance(piece, Answer):
                draft = piece   # the whole draft, after its text: its fields
                continue
            text = str(piece)
            if text:
                pieces.append(text)
                yield text
        _deliver(config, self.finish(draft if draft is not None else "".join(pieces), question, context))

    async def astream(self, input: Input, config: RunnableConfig | None = None, **kwargs: Any) -> AsyncIterator[str]:
        config = ensure_config(config)
        question, context = _question_and_context(input)
        pieces: list[str] = []
        draft: Answer | None = None
        async for piece in self.answerer.astream(question, context, config):
            if isinstance(piece, Answer):
                draft = piece
                continue
            text = str(piece)
            if text:
                pieces.append(text)
                yield text
        final = await asyncio.to_thread(self.finish, draft if draft is not None else "".join(pieces), question, context)
        _deliver(config, final)

    def transform(self, input: Iterator[Input], config: RunnableConfig | None = None, **kwargs: Any) -> Iterator[str]:
        yield from self.stream(_merged(input), config, **kwargs)

    async def atransform(self, input: AsyncIterator[Input], config: RunnableConfig | None = None,
                         **kwargs: Any) -> AsyncIterator[str]:
        final: Any = {}
        async for chunk in input:
            final = {**final, **chunk} if isinstance(chunk, Mapping) and isinstance(final, Mapping) else chunk
        async for piece in self.astream(final, config, **kwargs):
            yield piece


def _deliver(config: RunnableConfig, answer: Answer) -> None:
    sink = (config.get("configurable") or {}).get(ANSWER_SINK)
    if isinstance(sink, list):
        sink.append(answer)


def _merged(chunks: Iterator[Any]) -> Any:
    final: Any = {}
    for chunk in chunks:
        final = {**final, **chunk} if isinstance(chunk, Mapping) and isinstance(final, Mapping) else chunk
    return final


def _with_model_params(llm: Any, params: dict[str, Any]) -> Any:
    """Apply temperature / max_tokens: as a field copy when the model has them, else bound."""
    fields = getattr(type(llm), "model_fields", {})
    if all(k in fields for k in params):
        return llm.model_copy(update=params)
    if hasattr(llm, "bind"):
        return llm.bind(**params)
    raise ConfigError(f"{type(llm).__name__} does not take the settings {sorted(params)}")


def as_generation_chain(generation: Any) -> GenerationChain:
    """Any generation runnable as a `GenerationChain` (a custom chain's text goes through the same checks)."""
    if isinstance(generation, GenerationChain):
        return generation
    if isinstance(generation, Answerer):
        return GenerationChain(generation)
    return GenerationChain(RunnableAnswerer(generation))


def rag_chain_from_docs(llm: LLMLike = None, prompt: BasePromptTemplate | str | None = None, *,
                        on_unsupported: str = "flag", checks_embedding: Embeddings | str | None = "default",
                        context_window: int | None = None) -> GenerationChain:
    """Build the generation chain.

    Args:
        llm: an `Answerer`, a chat model / LLM, or None for the configured default (`RAG_LLM`, `auto`: an
            OpenAI-compatible endpoint, a local server, Ollama, else the offline fallback).
        prompt: a prompt with `{question}` and `{context}`; defaults to a grounded, cite-as-[n] prompt.
        on_unsupported: "flag" (default) or "refuse" an answer that cites nothing or is not supported.
        checks_embedding: the embedding of the support checks (None: lexical only).
        context_window: the model's window in tokens, for a model that does not say it.
    """
    return GenerationChain(llm, prompt, on_unsupported=on_unsupported, checks_embedding=checks_embedding,
                           context_window=context_window)

