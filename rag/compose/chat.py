"""Chat over a `RAG`: condense the conversation and the new message into a standalone question.

`ConversationalRAG(rag).chain()` takes `{"question": message, "history": [...]}` and returns the
RAG's output plus `standalone_question`, the question that was actually retrieved and answered.
The rest of the pipeline is the RAG's own. The chain is stateless: the caller passes the history
(LangChain messages, `("human", text)` tuples or `{"role", "content"}` dicts). For a server, give
it a `MessageStore` and a `session_id` in the input: the history is then read from the store and
the new turn appended after the answer.

Condensing uses a chat model when one is available (by default the RAG's own model) and otherwise
an offline rule: the named entities of the previous question (capitalised names) replace the
first pronoun of the new message ("When was it built?" after "Where is the Eiffel Tower?" becomes
"When was Eiffel Tower built?"), or are appended when it has neither a pronoun nor a name of its own.

Example:
    >>> carry_over_entities("When was it built?", [("human", "Where is the Eiffel Tower?"), ("ai", "Paris [1]")])
    'When was Eiffel Tower built?'
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any, Protocol

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    convert_to_messages,
)
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import (
    Runnable,
    RunnableConfig,
    RunnableGenerator,
    RunnableLambda,
)

from rag.base.errors import ConfigError, InputError

__all__ = ["CONDENSE_PROMPT", "ConversationalRAG", "InMemoryMessageStore", "MessageStore", "carry_over_entities",
           "named_entities"]

CONDENSE_PROMPT = ChatPromptTemplate.from_messages([
    ("system", "Rewrite the user's last message as one standalone question that can be understood without "
               "the conversation. Keep names, dates and numbers. Reply with the question only."),
    MessagesPlaceholder("history"),
    ("human", "{question}"),
])

_NOT_NAMES = frozenset("""what where when who whom whose how which why is are was were does do did can could
should would will tell give show list and but or so the a an in on at for of to from i you we it its they
please also then now ok okay yes no""".split())
_MESSAGE = "chat_message"   # the user's message while the RAG chain runs on the standalone question
_NAME = re.compile(r"[A-Z][\w-]*(?:'s)?(?:\s+(?:of\s+|de\s+|la\s+)?[A-Z][\w-]*(?:'s)?)*")
_PRONOUN = re.compile(r"\b(it|its|they|them|their|this|that|these|those|he|she|him|her|his)\b", re.IGNORECASE)
_POSSESSIVE = {"its", "their", "his", "her"}


class MessageStore(Protocol):
    """Where a server keeps conversations: `get(session_id)` and `add(session_id, messages)`."""

    def get(self, session_id: str) -> list[BaseMessage]: ...

    def add(self, session_id: str, messages: Sequence[BaseMessage]) -> None: ...


class InMemoryMessageStore:
    """A thread-safe in-process `MessageStore` (lost on restart), keeping the last `max_messages`."""

    def __init__(self, *, max_messages: int = 50) -> None:
        if max_messages < 2:
            raise ConfigError(f"max_messages must be >= 2 (one turn), got {max_messages}")
        self.max_messages = max_messages
        self._lock = threading.Lock()
        self._sessions: dict[str, list[BaseMessage]] = {}

    def get(self, session_id: str) -> list[BaseMessage]:
        with self._lock:
            return list(self._sessions.get(session_id, []))

    def add(self, session_id: str, messages: Sequence[BaseMessage]) -> None:
        with self._lock:
            kept = self._sessions.setdefault(session_id, [])
            kept.extend(messages)
            del kept[:-self.max_messages]

    def clear(self, session_id: str) -> None:
        with self._lock:
            self._sessions.pop(session_id, None)


def named_entities(text: str) -> list[str]:
    """Capitalised names in the text (sentence-initial question words and the like excluded).

    Example:
        >>> named_entities("What was Apple's revenue in the Greater China region?")
        ['Apple', 'Greater China']
    """
    out: list[str] = []
    for match in _NAME.finditer(text):
        words = [w for w in re.sub(r"'s\b", "", match.group()).split()]
        while words and words[0].lower() in _NOT_NAMES:
            words.pop(0)
        name = " ".join(words)
        if name and name not in out:
            out.append(name)
    return out


def carry_over_entities(question: str, history: Sequence[Any]) -> str:
    """The offline condensing rule (see the module docstring)."""
    messages = convert_to_messages(list(history)) if history else []
    previous = [m for m in messages if isinstance(m, HumanMessage)]
    carried: list[str] = []
    for message in reversed(previous):
        carried = [e for e in named_entities(str(message.content)) if e.lower() not in question.lower()]
        if carried:
            break
    if not carried:
        return question
    phrase = " and ".join(carried)
    match = _PRONOUN.search(question)
    if match:
        word = match.group(1).lower()
        replacement = f"{phrase}'s" if word in _POSSESSIVE else phrase
        return question[:match.start()] + replacement + question[match.end():]
    if named_entities(question):
        return question                    # the user named a new subject
    stripped = question.rstrip(" ?.!")
    return f"{stripped} ({phrase})?"


def _chat_model_of(rag: Any) -> Any:
    chain = getattr(rag, "generation_chain", None)
    answerer = getattr(chain, "answerer", None)   # an Answerer says which language model it has (None: none)
    return answerer.model if answerer is not None else getattr(chain, "llm", None)


class ConversationalRAG:
    """A `RAG` that answers follow-up messages (see the module docstring).

    Args:
        rag: the RAG that retrieves and answers.
        llm: the chat model that condenses; `"auto"` (default) uses the RAG's model when it is a
            chat model, None forces the offline rule.
        prompt: condensing prompt with `{history}` (messages placeholder) and `{question}`.
        store: optional message store; used when the input has a `session_id`.
        max_history: how many of the latest messages condensing looks at.
    """

    def __init__(self, rag: Any, *, llm: Any = "auto", prompt: ChatPromptTemplate | None = None,
                 store: MessageStore | None = None, max_history: int = 6) -> None:
        if max_history < 1:
            raise ConfigError(f"max_history must be >= 1, got {max_history}")
        self.rag = rag
        self.llm = _chat_model_of(rag) if llm == "auto" else llm
        self.prompt = prompt or CONDENSE_PROMPT
        self.store = store
        self.max_history = max_history

    # ------------------------------------------------------------------ condensing
    def _input(self, value: Any) -> dict[str, Any]:
        if isinstance(value, str):
            value = {"question": value}
        if not isinstance(value, dict) or not isinstance(value.get("question"), str) or not value["question"].strip():
            raise InputError("a chat turn is a message string or {'question': str, 'history': [...], 'session_id': str}")
        history = value.get("history")
        session = value.get("session_id")
        if history is None and session is not None:
            if self.store is None:
                raise InputError("session_id was given but this ConversationalRAG has no message store")
            history = self.store.get(str(session))
        try:
            messages = convert_to_messages(list(history or []))
        except (ValueError, TypeError, NotImplementedError) as exc:
            raise InputError(f"history must be messages, (role, text) tuples or role/content dicts: {exc}") from exc
        return {**value, "history": messages[-self.max_history:]}

    def _condense(self, inputs: dict[str, Any], config: Any = None) -> str:
        question, history = inputs["question"], inputs["history"]
        if not history:
            return question
        if self.llm is not None:
            chain = self.prompt | self.llm | StrOutputParser()
            text = chain.invoke({"question": question, "history": history}, config).strip()
            first = text.splitlines()[0].strip() if text else ""
            if first:
                return first
        return carry_over_entities(question, history)

    async def _acondense(self, inputs: dict[str, Any], config: Any = None) -> str:
        question, history = inputs["question"], inputs["history"]
        if not history:
            return question
        if self.llm is not None:
            chain = self.prompt | self.llm | StrOutputParser()
            text = (await chain.ainvoke({"question": question, "history": history}, config)).strip()
            first = text.splitlines()[0].strip() if text else ""
            if first:
                return first
        return carry_over_entities(question, history)

    def condense(self, question: str, history: Sequence[Any] = ()) -> str:
        """The standalone question for a message and the history before it."""
        return self._condense(self._input({"question": question, "history": list(history)}))

    # ------------------------------------------------------------------ the chain
    def _save(self, output: dict[str, Any]) -> None:
        session = output.get("session_id")
        if self.store is not None and session is not None:
            self.store.add(str(session), [HumanMessage(content=output["question"]),
                                          AIMessage(content=str(output.get("answer") or ""))])

    def _restore_and_save(self) -> Runnable:
        """The RAG chain's output as a chat turn's: the message back as `question`, the one answered as
        `standalone_question`; saved to the message store after the last chunk (streaming too)."""
        def rename(chunk: dict[str, Any]) -> dict[str, Any]:
            chunk = dict(chunk)
            if "question" in chunk:
                chunk["standalone_question"] = chunk.pop("question")
            if _MESSAGE in chunk:
                chunk["question"] = chunk.pop(_MESSAGE)
            return chunk

        def merge(final: dict[str, Any], chunk: dict[str, Any]) -> dict[str, Any]:
            for key, value in chunk.items():
                final[key] = final[key] + value if isinstance(value, str) and isinstance(final.get(key), str) \
                    and key == "answer" else value
            return final

        def transform(chunks: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
            final: dict[str, Any] = {}
            for chunk in chunks:
                chunk = rename(chunk)
                merge(final, chunk)
                yield chunk
            self._save(final)

        async def atransform(chunks: AsyncIterator[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
            final: dict[str, Any] = {}
            async for chunk in chunks:
                chunk = rename(chunk)
                merge(final, chunk)
                yield chunk
            self._save(final)

        return RunnableGenerator(transform, atransform, name="save_turn")

    def chain(self) -> Runnable:
        """`{"question", "history" | "session_id"} -> {"question", "standalone_question", "context", "answer", ...}`.

        Condense the message into a standalone question, then run `rag.chain()` on it: the same
        retrieval, generation, extras and input checks as a single question. The output's
        `question` is the message; `standalone_question` is what was retrieved and answered.
        """
        condense = RunnableLambda(self._condense, afunc=self._acondense, name="condense")

        def prepare(value: Any, config: RunnableConfig) -> dict[str, Any]:
            inputs = self._input(value)
            return {**inputs, _MESSAGE: inputs["question"], "question": condense.invoke(inputs, config)}

        async def aprepare(value: Any, config: RunnableConfig) -> dict[str, Any]:
            # A message store may block (a database): read it off the event loop.
            needs_store = isinstance(value, dict) and value.get("history") is None and value.get("session_id")
            inputs = await asyncio.to_thread(self._input, value) if needs_store else self._input(value)
            return {**inputs, _MESSAGE: inputs["question"], "question": await condense.ainvoke(inputs, config)}

        return (RunnableLambda(prepare, afunc=aprepare, name="condense_question") | self.rag.chain()
                | self._restore_and_save()).with_config(run_name="ConversationalRAG")

    def invoke(self, question: str, *, history: Sequence[Any] | None = None, session_id: str | None = None,
               config: Any = None) -> dict[str, Any]:
        """One chat turn; the output has the `standalone_question` that was answered."""
        payload: dict[str, Any] = {"question": question}
        if history is not None:
            payload["history"] = list(history)
        if session_id is not None:
            payload["session_id"] = session_id
        return self.chain().invoke(payload, config)
