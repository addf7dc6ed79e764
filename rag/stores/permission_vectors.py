"""Which way a Chroma collection answers a principal whose chunks are listed beside it, and the exact ranking.

A collection in a directory keeps each chunk's permission keys and vector in a file beside it
(`rag.stores.chroma_permitted`). A principal whose filter is "one of these keys is true" is then
answered one of two ways, whichever this module's cost model says costs less:

- **exact**: every permitted chunk's vector, quantized to int8 (`rag.stores.permission_segments`), is
  read from the file and scored (NumPy); each estimate is within a known bound of the cosine, so only
  the chunks whose bound reaches the best ones' are read again as float32 and ranked exactly
  (`exactly`: 130-340 vectors for 100 hits at 2-99% of 100,000 chunks). The answer is the exact
  nearest permitted chunks. Its cost grows with how many chunks are permitted times their dimension
  (a quarter of the float32 bytes).
- **over-fetch**: Chroma's own nearest-neighbour list (HNSW) with the request's own conditions, read
  `depth` deep as ids only; the file says which of them the principal may read (expected: the
  principal's share of `depth`), and only those are read from Chroma. The answer is the unrestricted
  search post-filtered to the principal, read deep enough to hold `k` of its chunks. Its cost grows
  with `depth`, so with `k` over the principal's share, times the dimension.

Either way each returned chunk is checked again on Chroma's own metadata (the file can only cost
recall, never let a chunk through).

**The cost model** (`exact_ms`, `over_fetch_ms`: CPU milliseconds of the path's own work; what both
paths share, reading the `k` answers from Chroma, is left out) is linear in what each path touches,
and its coefficients were fitted to what the two paths cost against each other, at 64 and 384
dimensions and k = 100, 20 and 8, by ``python bench/acl.py --paths --paths-k 100 20 8`` and
``--fit`` (docs/security.md "What it costs"). The default pipeline asks a store for 100 hits
(`RetrievalSettings().fetch_k`, its candidates; the `k` a request gives caps only the context). The
share at which the exact path stops paying is derived from them, per request, from the principal's
chunk count, `k`, the collection's size and the vectors' dimension. With 100 hits over 100,000
chunks it is about 78% at 64 dimensions, 59% at 384 and 54% at 768 (by the sum of the principal's
keys' counts, which counts a chunk of two keys twice: 50% for a principal who may read 43%); with
8-20 hits, 67-68%, 48-50% and 43-45%.

Example:
    >>> choose(k=100, permitted=2_000, stored=100_000, dim=384)     # 2%: reading 2,000 vectors is cheaper
    'exact'
    >>> choose(k=100, permitted=50_000, stored=100_000, dim=384)    # 50%: reading 50,000 int8 vectors is too
    'exact'
    >>> choose(k=100, permitted=70_000, stored=100_000, dim=384)    # 70%: ~180 candidates are
    'over-fetch'
    >>> over_fetch_depth(100, 70_000, 100_000)
    183
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
from langchain_core.documents import Document

from rag.base.filters import matches_canonical

__all__ = ["FORCE", "SLACK", "allowed_ids", "choose", "estimates", "exact_ms", "exactly", "over_fetch",
           "over_fetch_depth", "over_fetch_ms", "walk"]

#: The cost model's coefficients (CPU ms: only their ratios and signs decide), fitted by least squares to what decides
#: the choice: the exact path's added CPU time minus the over-fetch path's, each the median of pairs against the search
#: without a principal on the same questions (which cancels), at 64 and 384 dimensions, k = 100 (the hits the default
#: pipeline asks a store for: `RetrievalSettings().fetch_k`), 20 and 8, 100,000 chunks, principals of 0-1,000 of
#: 1,000 groups (2-99%), two runs: ``python bench/acl.py --paths --paths-k 100 20 8 --dim 384`` (and ``--dim 64``),
#: then ``python bench/acl.py --fit`` on their rows (bench/results/acl_paths.txt; session 40, 2026-11-29
#: 04:20-04:28 UTC, load average 3.8-6.0 on 2 shared cores). Of the 72 rows the model chooses the path measured
#: cheaper in 70; in the other two (43% at 384 dimensions, k = 20 and 8) the paths differ by 0.04-0.7 ms CPU, within
#: the noise. The exact path: per permitted vector (its number, scale and the bookkeeping) and per float of it (an
#: int8 code read and scored); its fixed part (the float32 re-rank of 80-300 vectors) is folded into the over-fetch
#: path's, 0 here.
EXACT_FIXED_MS = 0.0
EXACT_PER_VECTOR_MS = 0.0000538
EXACT_PER_FLOAT_MS = 0.000000328
#: The over-fetch path: what its HNSW query costs that the exact path does not (fixed, and per dimension), per
#: candidate (its id looked up in the file) and per candidate and dimension (HNSW's distances grow with the depth).
QUERY_FIXED_MS = 4.14
QUERY_FIXED_PER_FLOAT_MS = 0.0111
QUERY_PER_CANDIDATE_MS = 0.00514
QUERY_PER_CANDIDATE_FLOAT_MS = 0.0000137
#: How much deeper than the principal's share says the HNSW list is read (the share is an upper bound from the keys'
#: counts, a chunk of two keys counted twice, but a list's permitted hits vary).
SLACK = 1.25
_LOOKUP = 2000
#: Rounds of a deeper list when the first held fewer than `k` permitted chunks, before the exact path answers.
ROUNDS = 2
#: Tests only: "exact" or "over-fetch" whatever they cost, "lists" for neither (the plan of a collection without a
#: file: `rag.stores.permission_plan`); None: the cost model decides.
FORCE: str | None = None


def over_fetch_depth(k: int, permitted: int, stored: int) -> int:
    """How deep the HNSW list is read to hold `k` of a principal's chunks: `k` over its share (`permitted`, the sum
    of its keys' counts, of `stored`), times `SLACK`, plus a few; at most `stored`."""
    share = min(1.0, permitted / max(stored, 1))
    if share <= 0:
        return max(stored, 1)
    return min(max(stored, 1), math.ceil(k / share * SLACK) + 4)


def exact_ms(permitted: int, dim: int) -> float:
    """What the exact path is expected to cost (CPU ms) for `permitted` vectors of `dim` floats."""
    return EXACT_FIXED_MS + permitted * (EXACT_PER_VECTOR_MS + dim * EXACT_PER_FLOAT_MS)


def over_fetch_ms(depth: int, dim: int) -> float:
    """What the over-fetch path is expected to cost (CPU ms) for a list `depth` deep of `dim`-float vectors."""
    return QUERY_FIXED_MS + dim * QUERY_FIXED_PER_FLOAT_MS + depth * (QUERY_PER_CANDIDATE_MS
                                                                       + dim * QUERY_PER_CANDIDATE_FLOAT_MS)


def choose(*, k: int, permitted: int, stored: int, dim: int) -> str:
    """"exact" or "over-fetch", whichever is expected to cost less (`FORCE` overrides)."""
    if FORCE in ("exact", "over-fetch"):
        return FORCE
    depth = over_fetch_depth(k, permitted, stored)
    return "exact" if exact_ms(permitted, dim) <= over_fetch_ms(depth, dim) else "over-fetch"


def estimates(segments: Iterable[tuple[bytes, bytes, bytes]], query: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(chunk numbers, estimated cosine similarities, how far each may be from the truth) of the quantized vectors of
    `segments` ((numbers, scales, codes) as bytes: int64, float32, int8; `rag.stores.permission_segments`) to the
    normalised `query`; a chunk of two segments twice. Each segment is scored as the cursor yields it (only the
    scores are kept). A component is within half its vector's scale of the truth, so a cosine is within
    ``scale / 2 * sum(|query|)`` (plus float rounding). A product and a sum, not BLAS (its threads spin against a
    busy machine's other work: measured 7x slower at 11,000 vectors on 2 loaded cores). None: codes of another
    dimension."""
    size = query.size
    numbers, scores, scales = [], [], []
    for ns, ss, cs in segments:
        number = np.frombuffer(ns, dtype=np.int64)
        codes = np.frombuffer(cs, dtype=np.int8)
        if codes.size != number.size * size:
            return None
        numbers.append(number)
        scale = np.frombuffer(ss, dtype=np.float32)
        scales.append(scale)
        scores.append(np.einsum("ij,j->i", codes.reshape(number.size, size), query, dtype=np.float32) * scale)
    if not numbers:
        empty = np.zeros(0, dtype=np.float32)
        return np.zeros(0, dtype=np.int64), empty, empty
    slack = np.concatenate(scales) * np.float32(np.abs(query).sum() / 2 * 1.001) + np.float32(1e-5)
    return np.concatenate(numbers), np.concatenate(scores), slack


def exactly(side: sqlite3.Connection, numbers: np.ndarray, sims: np.ndarray, slack: np.ndarray, query: np.ndarray,
            first: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The chunks in exact order (cosine distance of their float32 vectors; ties by number), each once, in batches,
    from the estimates (`estimates`): a round takes a threshold ``t`` (the `first`-th highest lower bound, then 4x
    deeper each round the caller reads on), reads the float32 vectors of the chunks whose upper bound reaches ``t``
    (any chunk whose true cosine reaches ``t`` is among them, and no other reaches it) and yields those whose true
    cosine reaches ``t``, in order: the next ranks of the whole exact ranking. A chunk the file no longer holds is
    left out."""
    lower, upper = sims - slack, sims + slack
    done = np.zeros(0, dtype=np.int64)
    depth = first
    while True:
        whole = depth >= len(numbers)
        floor = -np.inf if whole else np.partition(lower, len(lower) - depth)[len(lower) - depth]
        wanted = np.unique(numbers[upper >= floor])
        wanted = wanted[~np.isin(wanted, done)] if len(done) else wanted
        found, dists = _exact(side, wanted, query)
        near = dists <= 1.0 - floor
        found, dists = found[near], dists[near]
        order = np.lexsort((found, dists))
        yield found[order], dists[order]
        if whole:
            return
        done = np.concatenate([done, found])
        depth *= 4


def _exact(side: sqlite3.Connection, numbers: np.ndarray, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the chunk numbers the file holds, cosine distances of their float32 vectors to `query`)."""
    found, vectors = [], []
    listed = numbers.tolist()
    for start in range(0, len(listed), _LOOKUP):
        part = listed[start:start + _LOOKUP]
        for n, vector in side.execute(f"SELECT n, vector FROM chunks WHERE n IN ({','.join('?' * len(part))})", part):
            if len(vector) == 4 * query.size:
                found.append(n)
                vectors.append(vector)
    if not found:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    matrix = np.frombuffer(b"".join(vectors), dtype=np.float32).reshape(len(found), query.size)
    return np.array(found, dtype=np.int64), 1.0 - np.einsum("ij,j->i", matrix, query, dtype=np.float32)


def over_fetch(side: sqlite3.Connection, k: int, keys: frozenset[str], most: int, stored: int,
               keep: Callable[[Mapping[str, Any]], bool], read: Callable[[list[str]], list[Document]],
               nearest: Callable[[int], tuple[list[tuple[str, float]], int]]
               ) -> tuple[list[tuple[Document, float]], int] | None:
    """Chroma's nearest list read deep enough to hold `k` chunks the file says the principal may read (deeper, up to
    `ROUNDS` times, when it held fewer); those read from Chroma in order and checked by `keep`.
    None: still too few (the exact path answers)."""
    depth = over_fetch_depth(k, most, stored)
    for _ in range(1 + ROUNDS):
        order, returned = nearest(depth)
        allowed = allowed_ids(side, [id_ for id_, _ in order], keys)
        ranked = [(id_, distance) for id_, distance in order if id_ in allowed]
        out: list[tuple[Document, float]] = []
        size = max(k + 4, 32)
        for start in range(0, len(ranked), size):
            part = ranked[start:start + size]
            found = {doc.id: doc for doc in read([id_ for id_, _ in part])}
            out += [(found[id_], distance) for id_, distance in part if id_ in found and keep(found[id_].metadata)]
            if len(out) >= k:
                return out[:k], depth
        if returned < depth:   # (Chroma holds no more: this is all of them; `stored` may be a count of before)
            return out, depth
        share = (len(out) + 2) / max(returned, 1)
        depth = max(2 * depth, math.ceil(k / share * SLACK) + 4)
    return None


def allowed_ids(side: sqlite3.Connection, ids: list[str], keys: frozenset[str]) -> set[str]:
    """Which of `ids` hold one of `keys` as true, by the file."""
    allowed: set[str] = set()
    for start in range(0, len(ids), _LOOKUP):
        part = ids[start:start + _LOOKUP]
        allowed.update(id_ for id_, key in side.execute(
            f"SELECT c.id, a.key FROM chunks AS c JOIN acl_keys AS a ON a.n = c.n "
            f"WHERE c.id IN ({','.join('?' * len(part))}) AND a.value = 1", part) if key in keys)
    return allowed


def walk(side: sqlite3.Connection, batches: Iterable[tuple[np.ndarray, np.ndarray]], k: int,
         keep: Callable[[Mapping[str, Any]], bool], rest: dict[str, Any] | None,
         read: Callable[[list[str]], list[Document]]) -> list[tuple[Document, float]]:
    """The scored chunks (their numbers here, in `batches` closest first, each once: `exactly`) read from Chroma
    in their order, in batches, the first `k` whose metadata passes."""
    out: list[tuple[Document, float]] = []
    size = max(k + 4, 32)
    for batch_numbers, batch_dists in batches:
        for start in range(0, len(batch_numbers), size):
            part = [int(n) for n in batch_numbers[start:start + size]]
            ids = dict(side.execute(f"SELECT n, id FROM chunks WHERE n IN ({','.join('?' * len(part))})",
                                    part).fetchall())
            found = {doc.id: doc for doc in read([ids[n] for n in part if n in ids])}
            for n, distance in zip(part, batch_dists[start:start + size].tolist(), strict=True):
                doc = found.get(ids.get(n))
                if doc is not None and keep(doc.metadata) and (rest is None or matches_canonical(doc.metadata, rest)):
                    out.append((doc, float(distance)))
                    if len(out) >= k:
                        return out
    return out


def chroma_documents(chroma_db: sqlite3.Connection, segment: str, ids: Sequence[str]) -> list[Document] | None:
    """The chunks `ids` (text, metadata) as Chroma's `get` returns them, read from its metadata segment's tables with
    SQL (~0.01 ms a chunk; Chroma's `get` costs ~0.07: as much as the rest of a search). Ids it does not hold are
    absent. `segment`: the collection's metadata segment (`chroma_segment`). None when a value is of a kind these
    tables do not say (Chroma's `get` answers then)."""
    if not ids:
        return []
    rows = chroma_db.execute(
        "SELECT e.embedding_id, m.key, m.string_value, m.int_value, m.float_value, m.bool_value "
        "FROM embeddings AS e JOIN embedding_metadata AS m ON m.id = e.id "
        f"WHERE e.segment_id = ? AND e.embedding_id IN ({','.join('?' * len(ids))})", [segment, *ids]).fetchall()
    texts: dict[str, str] = {}
    metadatas: dict[str, dict[str, Any]] = {}
    for id_, key, text, number, real, flag in rows:
        metadata = metadatas.setdefault(id_, {})
        if key == "chroma:document":
            texts[id_] = text
        elif text is not None:
            metadata[key] = text
        elif number is not None:
            metadata[key] = number
        elif real is not None:
            metadata[key] = real
        elif flag is not None:
            metadata[key] = bool(flag)
        else:
            return None
    return [Document(page_content=texts.get(id_) or "", metadata=metadatas[id_], id=id_)
            for id_ in dict.fromkeys(ids) if id_ in metadatas]


def chroma_segment(chroma_db: sqlite3.Connection, collection_id: str) -> str | None:
    """The id of a collection's metadata segment in Chroma's database (None: none, or tables of another layout)."""
    try:
        row = chroma_db.execute("SELECT id FROM segments WHERE collection = ? AND scope = 'METADATA'",
                                (collection_id,)).fetchone()
    except sqlite3.Error:
        return None
    return row[0] if row and isinstance(row[0], str) else None
