"""`LLMAnswerer`: a language model answers from the numbered sources, in a context that fits it.

The context is fitted to the model before it is sent: the budget is the model's context window
minus the prompt (system text and question), the answer's token limit and a small margin.
Tokens are counted with the model's own tokenizer when it has one (`rag.models.llms.TokenCounter`:
llama.cpp's), else bounded by characters (`chars_per_token`, 3 by default: safe for English prose,
code and figures alike). The window comes from the model when it says it (llama.cpp's `n_ctx`,
Ollama's model info), else from `context_window`, else `RAG_LLM_CONTEXT`, else 8,192 tokens.
Sources are kept whole in their order while they fit; the first that does not fit is cut to the
room left, so the numbers `[n]` of those kept do not change.

If the endpoint still refuses the request for its length, the answer is asked once more with the
context fitted to the window the error names ("maximum context length is 2048 tokens"), or halved
when it names none. Any other model failure becomes one `ModelError` line naming the model.

Example:
    >>> from langchain_core.documents import Document
    >>> from langchain_core.language_models import FakeListChatModel
    >>> llm = LLMAnswerer(FakeListChatModel(responses=["Paris [1]"]))
    >>> llm.answer("Where?", [Document(page_content="Paris.")])
    'Paris [1]'
"""

from __future__ import annotations

import contextlib

import re
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import BasePromptTemplate, ChatPromptTemplate
from langchain_core.runnables import Runnable, RunnableConfig

from rag.base.errors import ConfigError, ModelError, RagError
from rag.base.answer import Answer, as_answer
from rag.generation.answerer import Answerer
from rag.generation.prompts import DEFAULT_PROMPT, format_docs
from rag.models.llms import DEFAULT_CONTEXT_WINDOW, TokenCounter, context_window_setting, describe_model

__all__ = ["LLMAnswerer"]

_DEFAULT_ANSWER_TOKENS = 512
_MARGIN_TOKENS = 32
_FENCE_TOKENS = 16   # a source's `<source id=".." file="..">` fence
_LENGTH_ERROR = re.compile(r"context (?:length|window|size)|maximum context|too many tokens|context_length_exceeded|"
                           r"exceeds? (?:the )?(?:context|maximum)|prompt is too long|input is too long", re.IGNORECASE)
_WINDOW_IN_ERROR = re.compile(r"(?:context (?:length|window|size)(?: is| of)?|maximum context length is)\D{0,12}(\d{3,7})",
                              re.IGNORECASE)


class LLMAnswerer(Answerer):
    """A chat model (or any runnable taking a prompt) answering from the fitted context.

    Args:
        llm: a LangChain chat model or LLM (or any runnable taking the prompt's value).
        prompt: a prompt with `{question}` and `{context}` (a string is the system message);
            default: the grounded, cite-as-[n] prompt (`rag.generation.prompts.DEFAULT_PROMPT`).
        context_window: the model's window in tokens, when the model does not say it.
        max_answer_tokens: room kept for the answer; default the model's `max_tokens`, else 512.
        chars_per_token: the bound used to count tokens when the model has no tokenizer.
    """

    name = "llm"

    def __init__(self, llm: Any, prompt: BasePromptTemplate | str | None = None, *, context_window: int | None = None,
                 max_answer_tokens: int | None = None, chars_per_token: float = 3.0) -> None:
        if isinstance(prompt, str):
            prompt = ChatPromptTemplate.from_messages([("system", prompt), ("human", "{question}")])
        prompt = prompt or DEFAULT_PROMPT
        missing = {"question", "context"} - set(prompt.input_variables)
        if missing:
            raise ConfigError(f"the prompt must use the variables {{question}} and {{context}}; missing: {sorted(missing)}")
        for label, value in (("context_window", context_window), ("max_answer_tokens", max_answer_tokens)):
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ConfigError(f"{label} must be a positive integer, got {value!r}")
        if not 0.5 <= chars_per_token <= 8:
            raise ConfigError(f"chars_per_token must be in [0.5, 8], got {chars_per_token}")
        self.llm = llm
        self.prompt = prompt
        self.context_window = context_window
        self.max_answer_tokens = max_answer_tokens
        self.chars_per_token = chars_per_token
        self._chain: Runnable = prompt | llm | StrOutputParser()

    def __repr__(self) -> str:
        return f"LLMAnswerer({self.llm!r})"

    @property
    def model(self) -> Any:
        return self.llm

    def describe(self) -> str:
        return f"{describe_model(self.llm)}, {self.window()}-token window"

    # ------------------------------------------------------------------ fitting the context
    def window(self) -> int:
        """The model's context window in tokens (see the module docstring for where it comes from)."""
        own = self.llm.context_window() if isinstance(self.llm, TokenCounter) else None
        return own or self.context_window or context_window_setting() or DEFAULT_CONTEXT_WINDOW

    def answer_tokens(self) -> int:
        value = self.max_answer_tokens or getattr(self.llm, "max_tokens", None)
        return value if isinstance(value, int) and value > 0 else _DEFAULT_ANSWER_TOKENS

    def count(self, text: str) -> int:
        """Tokens in `text`: the model's tokenizer, else the characters bound."""
        if isinstance(self.llm, TokenCounter):
            return self.llm.count_tokens(text)
        return int(len(text) / self.chars_per_token) + 1

    def fit(self, question: str, context: Sequence[Document], window: int | None = None) -> list[Document]:
        """The context that fits the window with the prompt and the answer (sources kept in order)."""
        window = window or self.window()
        overhead = self.count(self.prompt.format(question=question, context="")) + self.answer_tokens() + _MARGIN_TOKENS
        room = window - overhead
        if room < 64:
            raise ConfigError(f"the model's {window}-token window leaves no room for context after the prompt and a "
                              f"{self.answer_tokens()}-token answer; use a model with a larger window or a shorter "
                              "answer limit (max_tokens)")
        kept: list[Document] = []
        for doc in context:
            cost = self.count(doc.page_content) + _FENCE_TOKENS
            if cost <= room:
                kept.append(doc)
                room -= cost
                continue
            if room > 64:   # the first source that does not fit is cut to the room left
                kept.append(Document(page_content=self._cut(doc.page_content, room - _FENCE_TOKENS),
                                     metadata=dict(doc.metadata), id=doc.id))
            break
        return kept

    def _cut(self, text: str, tokens: int) -> str:
        chars = int(tokens * self.chars_per_token)
        cut = text[:chars]
        while cut and self.count(cut) > tokens:
            cut = cut[: int(len(cut) * 0.9)]
        return cut

    def _inputs(self, question: str, context: Sequence[Document], window: int | None = None) -> dict[str, str]:
        return {"question": question, "context": format_docs(self.fit(question, context, window))}

    # ------------------------------------------------------------------ answering
    def _retry_window(self, exc: Exception, window: int, *, sent: bool = False) -> int:
        """The window to ask again at after a length refusal; `exc` raised again when it is not one (or when
        part of the answer was already streamed, or it is already a one-line `RagError`)."""
        message = str(exc)
        if sent or isinstance(exc, RagError) or not _LENGTH_ERROR.search(message):
            raise exc
        named = _WINDOW_IN_ERROR.search(message)
        if named and int(named.group(1)) < window:
            return int(named.group(1))
        return window // 2

    @contextlib.contextmanager
    def _one_line_errors(self) -> Iterator[None]:
        """Every model failure leaves as one line (`ModelError`), the cause chained for the log."""
        try:
            yield
        except RagError:
            raise
        except Exception as exc:   # noqa: BLE001 - every model failure is one line
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
            raise ModelError(f"the answer model ({describe_model(self.llm)}) failed: "
                             f"{type(exc).__name__}: {first}") from exc

    # Each form asks once at the window, and once more, fitted to the window a length refusal names (or
    # half), when the first ask was refused for its length before anything was streamed.
    def answer(self, question: str, context: Sequence[Document], config: RunnableConfig | None = None) -> Answer:
        window = self.window()
        with self._one_line_errors():
            try:
                text = self._chain.invoke(self._inputs(question, context, window), config)
            except Exception as exc:   # noqa: BLE001
                text = self._chain.invoke(self._inputs(question, context, self._retry_window(exc, window)), config)
        return as_answer(text, answerer=self.describe())

    async def aanswer(self, question: str, context: Sequence[Document],
                      config: RunnableConfig | None = None) -> Answer:
        window = self.window()
        with self._one_line_errors():
            try:
                text = await self._chain.ainvoke(self._inputs(question, context, window), config)
            except Exception as exc:   # noqa: BLE001
                text = await self._chain.ainvoke(self._inputs(question, context, self._retry_window(exc, window)),
                                                 config)
        return as_answer(text, answerer=self.describe())

    def stream(self, question: str, context: Sequence[Document],
               config: RunnableConfig | None = None) -> Iterator[str | Answer]:
        window, sent = self.window(), False
        with self._one_line_errors():
            try:
                for piece in self._chain.stream(self._inputs(question, context, window), config):
                    sent = True
                    yield piece
            except Exception as exc:   # noqa: BLE001
                retry = self._retry_window(exc, window, sent=sent)
                yield from self._chain.stream(self._inputs(question, context, retry), config)

    async def astream(self, question: str, context: Sequence[Document],
                      config: RunnableConfig | None = None) -> AsyncIterator[str | Answer]:
        window, sent = self.window(), False
        with self._one_line_errors():
            try:
                async for piece in self._chain.astream(self._inputs(question, context, window), config):
                    sent = True
                    yield piece
            except Exception as exc:   # noqa: BLE001
                retry = self._retry_window(exc, window, sent=sent)
                async for piece in self._chain.astream(self._inputs(question, context, retry), config):
                    yield piece
