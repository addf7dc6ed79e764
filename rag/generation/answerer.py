"""`Answerer`: the one interface every answer comes from.

An answerer turns a question and its numbered context into an `Answer` draft: the text, citing
sources as `[n]`, and what it knows of its own confidence. One method to implement:

```python
class Shout(Answerer):
    name = "shout"

    def answer(self, question, context):
        if not context:
            return Answer(NO_ANSWER, refused=True)
        return Answer(context[0].page_content.upper() + " [1]")
```

The chain (`rag.generation.rag_with_source.GenerationChain`) resolves the citations, checks each
sentence's support and applies the refusal setting once, after any answerer, so every door returns
the same answer fields. Nothing asks which answerer it is: `describe()` says it in one line.

The three that ship: `LLMAnswerer` (any LangChain chat model; the main path), the offline
`ExtractiveAnswerer` fallback (`rag.generation.extractive`), and `RunnableAnswerer` (any runnable
`{"question", "context"} -> str`, the seed's custom generation chains).

Example:
    >>> from langchain_core.documents import Document
    >>> RunnableAnswerer(lambda x: "Rome [1]").answer("Where?", [Document(page_content="Rome.")])
    'Rome [1]'
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda

from rag.base.answer import Answer, as_answer

__all__ = ["Answerer", "RunnableAnswerer"]


class Answerer:
    """Answers a question from its numbered context (see the module docstring).

    Subclasses implement `answer`; `aanswer`, `stream` and `astream` have working defaults
    (a worker thread; the whole answer as one piece) that a streaming model overrides.
    """

    name: str = "answerer"

    @property
    def model(self) -> Any:
        """The language model behind this answerer, None when there is none."""
        return None

    def answer(self, question: str, context: Sequence[Document], config: RunnableConfig | None = None) -> Answer | str:
        """The answer draft: its text cites the context as `[n]` (1-based)."""
        raise NotImplementedError(f"{type(self).__name__} must implement answer(question, context)")

    async def aanswer(self, question: str, context: Sequence[Document],
                      config: RunnableConfig | None = None) -> Answer | str:
        return await asyncio.to_thread(self.answer, question, context, config)

    def stream(self, question: str, context: Sequence[Document],
               config: RunnableConfig | None = None) -> Iterator[str | Answer]:
        """The answer's text in pieces; the last item may be the whole `Answer` draft (its fields)."""
        draft = as_answer(self.answer(question, context, config))
        yield draft.text
        yield draft   # the draft itself carries its fields (confidence, passage)

    async def astream(self, question: str, context: Sequence[Document],
                      config: RunnableConfig | None = None) -> AsyncIterator[str | Answer]:
        draft = as_answer(await self.aanswer(question, context, config))
        yield draft.text
        yield draft

    def describe(self) -> str:
        """Which model answers, in one line (shown by `rag ask`, `rag serve` and `/health`)."""
        return self.name

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class RunnableAnswerer(Answerer):
    """Any runnable (or function) `{"question", "context"} -> str` as an answerer."""

    name = "runnable"

    def __init__(self, runnable: Runnable | Callable[[dict[str, Any]], Any]) -> None:
        self.runnable = runnable if isinstance(runnable, Runnable) else RunnableLambda(runnable)

    def describe(self) -> str:
        inner = getattr(self.runnable, "llm", None) or self.runnable
        return f"a custom generation chain ({type(inner).__name__})"

    def answer(self, question: str, context: Sequence[Document], config: RunnableConfig | None = None) -> Answer:
        return as_answer(self.runnable.invoke({"question": question, "context": list(context)}, config))

    async def aanswer(self, question: str, context: Sequence[Document],
                      config: RunnableConfig | None = None) -> Answer:
        return as_answer(await self.runnable.ainvoke({"question": question, "context": list(context)}, config))

    def stream(self, question: str, context: Sequence[Document],
               config: RunnableConfig | None = None) -> Iterator[str | Answer]:
        for piece in self.runnable.stream({"question": question, "context": list(context)}, config):
            yield piece if isinstance(piece, Answer) else str(getattr(piece, "content", piece) or "")

    async def astream(self, question: str, context: Sequence[Document],
                      config: RunnableConfig | None = None) -> AsyncIterator[str | Answer]:
        async for piece in self.runnable.astream({"question": question, "context": list(context)}, config):
            yield piece if isinstance(piece, Answer) else str(getattr(piece, "content", piece) or "")

    def __repr__(self) -> str:
        return f"RunnableAnswerer({self.runnable!r})"
