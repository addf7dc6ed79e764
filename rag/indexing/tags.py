"""Tags (RAGTools get_tags / build_tags): keyword tags per chunk, selectable with filters.

Chroma metadata values must be scalars, so a chunk's tags are stored twice:

- `tags`: the tags joined with "|" between and around them (`"|revenue|margin|"`), for display;
- `tag_<tag>`: `True` for each tag, so the portable filter dialect selects on them:
  `{"tag_revenue": True}` or `{"$or": [{"tag_revenue": True}, {"tag_margin": True}]}`.

Tag names are lowercase words of letters, digits and `_` (other characters become `_`).

Example:
    >>> from langchain_core.documents import Document
    >>> tagger = KeywordTagger(vocabulary=["revenue", "interest rates"])
    >>> chunk = tagger([Document(page_content="Interest rates rose; revenue fell.")])[0]
    >>> chunk.metadata["tags"], chunk.metadata["tag_interest_rates"]
    ('|interest_rates|revenue|', True)
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from langchain_core.documents import Document

from rag.base.errors import ConfigError
from rag.base.text import tokenize

__all__ = ["TAG_PREFIX", "KeywordTagger", "tag_filter", "tag_key"]

TAG_PREFIX = "tag_"
_NON_WORD = re.compile(r"[^a-z0-9_]+")


def tag_key(tag: str) -> str:
    """The metadata key of a tag: `tag_` + the normalised tag.

    Example:
        >>> tag_key("Interest Rates")
        'tag_interest_rates'
    """
    name = _NON_WORD.sub("_", tag.strip().lower()).strip("_")
    if not name:
        raise ConfigError(f"a tag needs at least one letter or digit, got {tag!r}")
    return TAG_PREFIX + name


def tag_filter(*tags: str, match: str = "any") -> dict[str, Any]:
    """A portable filter selecting chunks with any (or all) of `tags`.

    Example:
        >>> tag_filter("revenue", "margin")
        {'$or': [{'tag_revenue': True}, {'tag_margin': True}]}
    """
    if match not in ("any", "all"):
        raise ConfigError(f"match must be 'any' or 'all', got {match!r}")
    if not tags:
        raise ConfigError("tag_filter needs at least one tag")
    clauses = [{tag_key(t): True} for t in tags]
    return clauses[0] if len(clauses) == 1 else {"$or" if match == "any" else "$and": clauses}


class KeywordTagger:
    """Tag chunks with keywords: from a fixed vocabulary, or the top TF-IDF words of each chunk.

    Args:
        vocabulary: tags to look for (words or phrases, matched on stemmed words); None picks
            the `max_tags` most distinctive words of each chunk within the batch.
        max_tags: the most tags per chunk.

    Example:
        >>> KeywordTagger(max_tags=3).settings()
        {'type': 'keyword', 'max_tags': 3, 'vocabulary': None}
    """

    def __init__(self, *, vocabulary: Sequence[str] | None = None, max_tags: int = 5) -> None:
        if isinstance(max_tags, bool) or not isinstance(max_tags, int) or max_tags < 1:
            raise ConfigError(f"max_tags must be a positive integer, got {max_tags!r}")
        if isinstance(vocabulary, str):
            raise ConfigError("vocabulary must be a list of tags, got a single string")
        self.vocabulary = list(vocabulary) if vocabulary is not None else None
        self.max_tags = max_tags
        self._phrases = [(tag_key(v)[len(TAG_PREFIX):], tokenize(v)) for v in self.vocabulary or []]

    def settings(self) -> dict[str, Any]:
        """The settings as data, for a knowledge base manifest."""
        return {"type": "keyword", "max_tags": self.max_tags, "vocabulary": self.vocabulary}

    def tags(self, chunks: Sequence[Document]) -> list[list[str]]:
        """The tags of each chunk (sorted)."""
        token_lists = [tokenize(c.page_content) for c in chunks]
        if self._phrases:
            out = []
            for toks in token_lists:
                text = " " + " ".join(toks) + " "
                found = [name for name, phrase in self._phrases if phrase and f" {' '.join(phrase)} " in text]
                out.append(sorted(found[: self.max_tags]))
            return out
        surface = [tokenize(c.page_content, stem=False) for c in chunks]
        df = Counter(tok for toks in token_lists for tok in set(toks))
        n = len(chunks)
        out = []
        for toks, words in zip(token_lists, surface, strict=True):
            # Stemmed tokens score; the shortest surface word with that stem names the tag.
            names: dict[str, str] = {}
            for word in words:
                stem = tokenize(word)
                if stem and (stem[0] not in names or len(word) < len(names[stem[0]])):
                    names[stem[0]] = word
            counts = Counter(t for t in toks if not t[0].isdigit() and len(t) > 2)
            scored = sorted(counts, key=lambda t: (-counts[t] * math.log(1 + n / df[t]), t))
            out.append(sorted({_NON_WORD.sub("_", names.get(t, t)) for t in scored[: self.max_tags]}))
        return out

    def __call__(self, chunks: Sequence[Document]) -> list[Document]:
        """Copies of `chunks` with `tags` and `tag_<tag>` metadata."""
        tagged = []
        for chunk, tags in zip(chunks, self.tags(chunks), strict=True):
            meta = {k: v for k, v in chunk.metadata.items() if not k.startswith(TAG_PREFIX) and k != "tags"}
            meta["tags"] = "|" + "|".join(tags) + "|" if tags else ""
            meta.update({TAG_PREFIX + t: True for t in tags})
            tagged.append(Document(page_content=chunk.page_content, metadata=meta, id=chunk.id))
        return tagged
