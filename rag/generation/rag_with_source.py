"""The generation chain: `{"question", "context"} -> answer` with numbered `[n]` citations.

`rag_chain_from_docs()` is the seed's name for it. With an LLM it formats the context as
fenced, numbered sources and prompts the model to answer only from them; with no LLM
configured it uses the offline `ExtractiveAnswerer`.

Example:
    >>> from langchain_core.documents import Document
    >>> from langchain_core.language_models import FakeListChatModel
    >>> chain = rag_chain_from_docs(llm=FakeListChatModel(responses=["Paris [1]"]))
    >>> chain.invoke({"question": "Where?", "context": [Document(page_content="Paris.")]})
    'Paris [1]'
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import BasePromptTemplate, ChatPromptTemplate
from langchain_core.runnables import Runnable, RunnableConfig, RunnablePassthrough
from langchain_core.runnables.utils import Input

from rag.base.errors import ConfigError
from rag.generation.answerer import default_llm
from rag.generation.extractive import ExtractiveAnswerer
from rag.generation.prompts import DEFAULT_PROMPT, format_docs

__all__ = ["GENERATION_SETTINGS", "GenerationChain", "rag_chain_from_docs"]

#: The per-call settings `RAG.chain(generation_chain={...})` accepts for a `GenerationChain`.
GENERATION_SETTINGS = ("prompt", "temperature", "max_tokens", "llm")


def _context_to_text(inputs: dict[str, Any]) -> str:
    context = inputs.get("context") or []
    return context if isinstance(context, str) else format_docs(context)


class GenerationChain(Runnable[dict, str]):
    """prompt | llm | str, or the extractive answerer, with settings that can be changed per chain.

    Use `rag_chain_from_docs()` to build one; `with_settings(temperature=0, prompt=...)` returns
    a new chain with other settings, leaving this one untouched.
    """

    def __init__(self, llm: Any, prompt: BasePromptTemplate | str | None = None) -> None:
        if isinstance(prompt, str):
            prompt = ChatPromptTemplate.from_messages([("system", prompt), ("human", "{question}")])
        prompt = prompt or DEFAULT_PROMPT
        missing = {"question", "context"} - set(prompt.input_variables)
        if missing and not isinstance(llm, ExtractiveAnswerer):
            raise ConfigError(f"the prompt must use the variables {{question}} and {{context}}; missing: {sorted(missing)}")
        self.llm = llm
        self.prompt = prompt
        self._chain = self._build()

    def __repr__(self) -> str:
        return f"GenerationChain(llm={self.llm!r})"

    def get_name(self, suffix: str | None = None, *, name: str | None = None) -> str:
        return name or ("generate" + (suffix or ""))

    def _build(self) -> Runnable[dict, str]:
        if isinstance(self.llm, ExtractiveAnswerer):
            return self.llm
        return (
            RunnablePassthrough.assign(context=_context_to_text).with_config(run_name="format_context")
            | self.prompt
            | self.llm
            | StrOutputParser()
        )

    def with_settings(self, **settings: Any) -> GenerationChain:
        """A copy with other settings: `prompt`, `llm`, `temperature`, `max_tokens`.

        Raises:
            ConfigError: for an unknown setting, listing the valid ones.
        """
        unknown = sorted(set(settings) - set(GENERATION_SETTINGS))
        if unknown:
            raise ConfigError(f"unknown generation setting(s) {unknown}; valid: {', '.join(GENERATION_SETTINGS)}")
        llm = settings.get("llm", self.llm)
        model_params = {k: settings[k] for k in ("temperature", "max_tokens") if k in settings}
        if model_params and not isinstance(llm, ExtractiveAnswerer):
            llm = _with_model_params(llm, model_params)
        return GenerationChain(llm, settings.get("prompt", self.prompt))

    # Everything else is delegated to the built chain, so streaming stays token by token.
    def invoke(self, input: Input, config: RunnableConfig | None = None, **kwargs: Any) -> str:
        return self._chain.invoke(input, config, **kwargs)

    async def ainvoke(self, input: Input, config: RunnableConfig | None = None, **kwargs: Any) -> str:
        return await self._chain.ainvoke(input, config, **kwargs)

    def stream(self, input: Input, config: RunnableConfig | None = None, **kwargs: Any) -> Iterator[str]:
        yield from self._chain.stream(input, config, **kwargs)

    async def astream(self, input: Input, config: RunnableConfig | None = None, **kwargs: Any) -> AsyncIterator[str]:
        async for chunk in self._chain.astream(input, config, **kwargs):
            yield chunk

    def transform(self, input: Iterator[Input], config: RunnableConfig | None = None, **kwargs: Any) -> Iterator[str]:
        yield from self._chain.transform(input, config, **kwargs)

    async def atransform(self, input: AsyncIterator[Input], config: RunnableConfig | None = None,
                         **kwargs: Any) -> AsyncIterator[str]:
        async for chunk in self._chain.atransform(input, config, **kwargs):
            yield chunk


def _with_model_params(llm: Any, params: dict[str, Any]) -> Any:
    """Apply temperature / max_tokens: as a field copy when the model has them, else bound."""
    fields = getattr(type(llm), "model_fields", {})
    if all(k in fields for k in params):
        return llm.model_copy(update=params)
    if hasattr(llm, "bind"):
        return llm.bind(**params)
    raise ConfigError(f"{type(llm).__name__} does not take the settings {sorted(params)}")


def rag_chain_from_docs(llm: Any = None, prompt: BasePromptTemplate | str | None = None) -> GenerationChain:
    """Build the generation chain.

    Args:
        llm: a chat model / LLM runnable, or None for the configured default
            (`RAG_LLM`: unset = offline extractive answerer, `openai`, `local`).
        prompt: a prompt with `{question}` and `{context}`; defaults to a grounded, cite-as-[n] prompt.
    """
    if llm is None:

        llm = default_llm()
    return GenerationChain(llm, prompt)
