"""Where chunks end: cut scores, the token windows of a piece, over-long tokens cut to size.

Private to `rag.indexing.chunking` (and the table splitter): a piece of text is tokenized once;
these functions choose the `[start, end)` token ranges of its chunks so that each holds at most
`size` tokens and `max_chars` characters, ends at the best boundary in its window's second half
and, when it can, holds text and not only headings.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["boundary_scores", "cut", "split_long_tokens", "windows"]


def boundary_scores(text: str, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """How good a cut before each token is: 4 blank line, 3 line break, 2 sentence end, 1 space, 0 none."""
    n = len(starts)
    scores = np.zeros(n + 1, dtype=np.int8)
    scores[n] = 5
    if n < 2:
        return scores
    codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    newlines = np.concatenate(([0], np.cumsum(codes == 10)))
    prev_end, next_start = ends[:-1], starts[1:]
    gap = next_start > prev_end
    breaks = newlines[next_start] - newlines[prev_end]
    last = codes[np.maximum(prev_end - 1, 0)]
    sentence = ((last == 46) | (last == 33) | (last == 63) | (last == 59) | (last == 58)) & gap  # . ! ? ; :
    inner = np.where(breaks >= 2, 4, np.where(breaks == 1, 3, np.where(sentence, 2, gap.astype(np.int8))))
    scores[1:n] = inner
    return scores


def split_long_tokens(spans: Sequence[tuple[int, int]], limit: int) -> tuple[np.ndarray, np.ndarray]:
    """Token starts and ends, with any token longer than `limit` characters cut into pieces.

    A word-piece tokenizer reads an unbroken run of letters as one `[UNK]` token however long it
    is, so without this a 400,000-letter run would count as one token and become one chunk.
    """
    arr = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
    lengths = arr[:, 1] - arr[:, 0]
    if not len(arr) or int(lengths.max()) <= limit:
        return arr[:, 0].copy(), arr[:, 1].copy()
    counts = np.maximum(1, -(-lengths // limit))
    first = np.repeat(np.cumsum(counts) - counts, counts)
    starts = np.repeat(arr[:, 0], counts) + (np.arange(int(counts.sum())) - first) * limit
    return starts, np.minimum(starts + limit, np.repeat(arr[:, 1], counts))


def _best_cut(scores: np.ndarray, start: int, limit: int, body: np.ndarray) -> int:
    """The cut ending the chunk that starts at token `start` and may reach token `limit`.

    The latest of the best-scored cuts in the window's second half, such that the chunk holds a
    token of text (not only headings) and so does the rest (`body` lists the text tokens). When
    that is impossible the constraint is relaxed: first the half-window rule, then the text rule
    for the rest, then for the chunk (a run of headings longer than a chunk).
    """
    lo = start + max(1, (limit - start) // 2)
    n = len(scores) - 1
    k = int(np.searchsorted(body, start))
    first_text = int(body[k]) if k < len(body) else n
    last_text = int(body[-1]) if len(body) else n
    a, b = max(lo, first_text + 1), min(limit, last_text)
    if a > b:  # a shorter chunk
        a = max(start + 1, first_text + 1)
    if a > b and first_text < limit:  # the text left is one token: it goes with the headings before it
        a, b = max(start + 1, first_text + 1), limit
    if a > b:  # a run of headings longer than a chunk
        a, b = lo, limit
    return b - int(np.argmax(scores[a:b + 1][::-1]))


def windows(scores: np.ndarray, starts: np.ndarray, ends: np.ndarray, body: np.ndarray, *, size: int,
             overlap: int, max_chars: int) -> list[tuple[int, int]]:
    """Token ranges `[start, end)` of the chunks: at most `size` tokens and `max_chars` characters each.

    Consecutive chunks share up to `overlap` tokens (and a proportional share of `max_chars`),
    starting on a word.
    """
    n = len(starts)
    overlap_chars = max_chars * overlap // max(size, 1)
    out = []
    start = 0
    while start < n:
        fits = int(np.searchsorted(ends, starts[start] + max_chars, side="right"))
        limit = min(start + size, max(fits, start + 1))
        if limit >= n:
            out.append((start, n))
            break
        end = _best_cut(scores, start, limit, body)
        out.append((start, end))
        nxt = max(end - overlap, int(np.searchsorted(starts, ends[end - 1] - overlap_chars, side="left")))
        if overlap and nxt < end:
            words = np.flatnonzero(scores[nxt:end] >= 1)
            nxt = nxt + int(words[0]) if len(words) else end
        else:
            nxt = end
        start = max(nxt, start + 1)
    return out


def cut(text: str, spans: Sequence[tuple[int, int]], *, size: int, overlap: int, max_chars: int,
        headings: Sequence[tuple[int, int]] = (), joins: Sequence[int] = ()) -> list[tuple[int, int, int]]:
    """`(start, end, tokens)` character spans of the chunks of `text`, given its token `spans`.

    `headings` are character spans of heading lines: a chunk ends on them alone only when a run of
    headings is longer than a chunk. `joins` are character offsets a chunk ends at only when no other cut
    fits its window (a definition's description line, tied to its term on the line above).
    """
    starts, ends = split_long_tokens(spans, max(1, max_chars // 8))
    if not len(starts):
        return []
    ends = np.maximum.accumulate(ends)
    if len(starts) <= size and int(ends[-1] - starts[0]) <= max_chars:
        return [(int(starts[0]), int(ends[-1]), len(starts))]
    is_heading = np.zeros(len(starts), dtype=bool)
    for first, last in headings:
        is_heading |= (starts >= first) & (starts < last)
    scores = boundary_scores(text, starts, ends)
    if len(joins):
        scores[np.flatnonzero(np.isin(starts, np.asarray(joins, dtype=np.int64)))] = 0
    ranges = windows(scores, starts, ends, np.flatnonzero(~is_heading),
                     size=size, overlap=overlap, max_chars=max_chars)
    return [(int(starts[a]), int(ends[b - 1]), b - a) for a, b in ranges]
