"""AutoContext (spRAG): embed each chunk with its document's title, section and summary.

A chunk such as "Revenue grew 4%." says little on its own; embedded as

    3M 2022 10-K / Results of Operations
    3M is a diversified technology company ... (one-sentence document summary)

    Revenue grew 4%.

it is found by questions about 3M's results. Only the embedded text changes: the stored chunk
stays the original text. The summary is extractive (the document's most central sentence,
no model) unless a chat model is given. The header is kept short (`max_header_tokens`) so a
default 200-token chunk plus its header still fits MiniLM's 256 word pieces.

Example:
    >>> from langchain_core.documents import Document
    >>> ctx = AutoContext()
    >>> chunk = Document(page_content="Revenue grew 4%.", metadata={"doc_id": "d1", "title": "3M 2022",
    ...                                                             "section": "Results"})
    >>> print(ctx.embedding_texts([chunk], summaries={"d1": "3M makes things."})[0])
    3M 2022 / Results
    3M makes things.
    <BLANKLINE>
    Revenue grew 4%.
"""

from __future__ import annotations

import functools
import logging
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.documents import Document

from rag.base.errors import ConfigError
from rag.base.text import split_sentences, tokenize
from rag.indexing.tokens import ApproximateTokenizer

__all__ = ["SUMMARY_SOURCE_CHARS", "AutoContext", "extractive_summary"]

logger = logging.getLogger(__name__)

#: a summary reads the first chunks of a document up to this many characters (its start says what it is about)
SUMMARY_SOURCE_CHARS = 30_000
_LLM_SOURCE_CHARS = 6_000
_MIN_SENTENCE_WORDS = 6
_MAX_SENTENCE_WORDS = 60
_WORD = re.compile(r"\S+")
_CHARS_PER_TOKEN = 5   # `ApproximateTokenizer`: letters in pieces of up to 5, digits up to 3, each symbol one
_SUMMARY_PROMPT = ("Summarise what the following document is about in one sentence of at most 30 words. "
                   "Name the organisation, the kind of document and its period when they are given.\n\n"
                   "Title: {title}\n\n{text}")


def extractive_summary(text: str, *, title: str = "", max_words: int = 30) -> str:
    """The sentence that best says what the document is, cut to `max_words` words (no model).

    A sentence scores the mean log document frequency of its distinct stemmed words (recurring
    vocabulary beats boilerplate), times one plus the number of title words it contains (the
    company, the form), discounted by its position (documents introduce themselves early).
    Short fragments and table rows are skipped.

    Example:
        >>> extractive_summary("Page 1. Acme sells anvils. Acme anvils are sold to coyotes worldwide every year.",
        ...                    title="Acme anvils")
        'Acme anvils are sold to coyotes worldwide every year.'
    """
    sentences = split_sentences(text[:SUMMARY_SOURCE_CHARS])
    token_lists = [tokenize(s) for s in sentences]
    frequency = Counter(tok for toks in token_lists for tok in set(toks))
    title_tokens = set(tokenize(title.replace("_", " ")))
    best, best_score = "", -1.0
    for position, (sentence, toks) in enumerate(zip(sentences, token_lists, strict=True)):
        words = sentence.split()
        if len(toks) < 3 or sum(ch.isalpha() for ch in sentence) < len(sentence) / 2:
            continue
        distinct = set(toks)
        score = sum(math.log1p(frequency[t]) for t in distinct) / len(distinct)
        score *= (1 + len(distinct & title_tokens)) / (1 + position / len(sentences))
        if not _MIN_SENTENCE_WORDS <= len(words) <= _MAX_SENTENCE_WORDS:
            score /= 2
        if score > best_score:
            best, best_score = sentence, score
    if not best and sentences:
        best = sentences[0]
    words = best.split()
    return " ".join(words[:max_words]) + (" ..." if len(words) > max_words else "")


class AutoContext:
    """Build the text that is embedded for each chunk: title / section, summary, chunk.

    Args:
        enabled: False embeds the chunk text alone (recorded in the manifest either way).
        llm: a chat model (any LangChain Runnable taking a string) that writes document
            summaries; None uses `extractive_summary`.
        max_header_tokens: the header (title, section, summary) is trimmed to this many
            approximate tokens.

    Example:
        >>> AutoContext(enabled=False).settings()
        {'enabled': False, 'summary': 'extractive', 'max_header_tokens': 48}
    """

    def __init__(self, *, enabled: bool = True, llm: Any = None, max_header_tokens: int = 48) -> None:
        if not isinstance(enabled, bool):
            raise ConfigError(f"enabled must be True or False, got {enabled!r}")
        if isinstance(max_header_tokens, bool) or not isinstance(max_header_tokens, int) or max_header_tokens < 8:
            raise ConfigError(f"max_header_tokens must be an integer >= 8, got {max_header_tokens!r}")
        if llm is not None and not hasattr(llm, "invoke"):
            raise ConfigError(f"llm must be a LangChain chat model or Runnable, got {type(llm).__name__}")
        self.enabled = enabled
        self.llm = llm
        self.max_header_tokens = max_header_tokens

    def settings(self) -> dict[str, Any]:
        """The settings as data, for a knowledge base manifest."""
        summary = "extractive"
        if self.llm is not None:
            name = getattr(self.llm, "model_name", None) or getattr(self.llm, "model", None)
            summary = f"llm:{name or type(self.llm).__name__}"
        return {"enabled": self.enabled, "summary": summary, "max_header_tokens": self.max_header_tokens}

    def summarize(self, title: str, text: str) -> str:
        """A one-sentence summary of a document: from the LLM when configured, else extractive."""
        if not self.enabled:
            return ""
        if self.llm is None:
            return extractive_summary(text, title=title)
        reply = self.llm.invoke(_SUMMARY_PROMPT.format(title=title, text=text[:_LLM_SOURCE_CHARS]))
        content = getattr(reply, "content", reply)
        summary = " ".join(str(content).split())
        if not summary:
            logger.warning("the LLM gave an empty summary for %r; using an extractive one", title)
            return extractive_summary(text, title=title)
        return summary

    def summaries(self, chunks: Sequence[Document]) -> dict[str, str]:
        """One summary per `doc_id`, from the document's chunks in order."""
        if not self.enabled:
            return {}
        texts: dict[str, list[str]] = {}
        titles: dict[str, str] = {}
        for chunk in chunks:
            doc_id = str(chunk.metadata.get("doc_id", ""))
            parts = texts.setdefault(doc_id, [])
            if sum(len(p) for p in parts) < SUMMARY_SOURCE_CHARS:
                parts.append(chunk.page_content)
            titles.setdefault(doc_id, str(chunk.metadata.get("title") or ""))
        return {doc_id: self.summarize(titles[doc_id], "\n\n".join(parts)) for doc_id, parts in texts.items()}

    def header(self, metadata: Mapping[str, Any], summary: str) -> str:
        """`"{title} / {section}\\n{summary}"`, trimmed to `max_header_tokens` (empty when disabled)."""
        if not self.enabled:
            return ""

        counter = _COUNTER
        # File-name titles read better with spaces: "3M_2022_10K" -> "3M 2022 10K".
        title = _trimmed_title(str(metadata.get("title") or ""), self.max_header_tokens // 3)
        # The section is what tells chunks of one document apart (title and summary are the same for
        # all of them), so it may take half the header; the summary gets what is left.
        section = _trimmed_section(str(metadata.get("section") or ""), self.max_header_tokens // 2)
        first = " / ".join(part for part in (title, section) if part)
        budget = self.max_header_tokens - counter.count(first)
        summary = _trim(summary, max(budget, 0), counter)
        return "\n".join(part for part in (first, summary) if part)

    def embedding_texts(self, chunks: Sequence[Document], *, summaries: Mapping[str, str] | None = None) -> list[str]:
        """The text to embed for each chunk (the chunk itself when disabled).

        Args:
            chunks: chunks with `doc_id`, `title` and optionally `section` metadata.
            summaries: per-`doc_id` summaries; computed with `summaries()` when omitted.
        """
        if not self.enabled:
            return [c.page_content for c in chunks]
        if summaries is None:
            summaries = self.summaries(chunks)
        out = []
        for chunk in chunks:
            head = self.header(chunk.metadata, summaries.get(str(chunk.metadata.get("doc_id", "")), ""))
            out.append(f"{head}\n\n{chunk.page_content}" if head else chunk.page_content)
        return out


_COUNTER = ApproximateTokenizer()


@functools.lru_cache(maxsize=256)
def _trimmed_title(title: str, max_tokens: int) -> str:
    """A title trimmed for the header, once per title (every chunk of a document has the same)."""
    return _trim(title.replace("_", " "), max_tokens, _COUNTER)


@functools.lru_cache(maxsize=256)
def _trimmed_section(section: str, max_tokens: int) -> str:
    """A section path trimmed for the header, once per section (the chunks under one heading share it)."""
    return _trim_section(section, max_tokens, _COUNTER)


def _trim_section(section: str, max_tokens: int, counter: Any) -> str:
    """Trim a "Heading / Sub-heading" path from the left: the innermost heading says the most.

    Linear in the section's length: a part's tokens are counted once (`counter` counts text joined by spaces as
    the sum of its parts, as `ApproximateTokenizer` does; each " / " adds one).
    """
    parts = [p for p in (" ".join(part.split()) for part in section.split(" / ")) if p]
    counts = [counter.count(p) for p in parts]
    total, first = sum(counts) + len(parts) - 1, 0
    while len(parts) - first > 1 and total > max_tokens:
        total -= counts[first] + 1
        first += 1
    return _trim(" / ".join(parts[first:]), max_tokens, counter)


def _trim(text: str, max_tokens: int, counter: Any) -> str:
    """Cut `text` at a word so it has at most `max_tokens` tokens, with " ..." when cut.

    Linear in the text's length, and only the words that can be kept are counted (issue 37: a 2,000-word
    heading cost minutes when words were dropped one at a time and the rest counted again, for every chunk).
    Text joined by spaces counts as the sum of its words (`ApproximateTokenizer`'s tokens never span a space,
    and each takes at most `_CHARS_PER_TOKEN` characters).
    """
    longest = _CHARS_PER_TOKEN * (max_tokens + 1)   # a word longer than this has more than max_tokens tokens
    words, counts, total = [], [], 0
    for match in _WORD.finditer(text):
        words.append(match.group())
        counts.append(max_tokens + 1 if len(words[-1]) > longest else counter.count(words[-1]))
        total += counts[-1]
        if total > max_tokens:
            break
    else:
        return " ".join(words)
    budget, kept, used = max_tokens - counter.count(" ..."), 0, 0
    while kept < len(counts) and used + counts[kept] <= budget:
        used += counts[kept]
        kept += 1
    if kept:
        return " ".join(words[:kept]) + " ..."
    first = words[0]   # one very long word: cut characters (by a quarter at a time, as before)
    while len(first) > longest:
        first = first[: len(first) * 3 // 4]
    while first and counter.count(first + " ...") > max_tokens:
        first = first[: len(first) * 3 // 4]
    return first + " ..." if first else ""
