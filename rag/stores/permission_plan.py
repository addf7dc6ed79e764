"""How a store whose native filter is slow answers a principal's permission filter: `PermissionPlan`.

A request's filter reaches a store as one filter: the request's own conditions ANDed with the
principal's permission filter (`rag.base.acl`, one `$or` of `acl_*` keys). Chroma keeps boolean
metadata unindexed and evaluates each `$or` branch over its whole metadata table, so at 100,000
chunks that `$or` costs hundreds of milliseconds to minutes per search. The plan is an execution
strategy only, never a looser filter:

1. **post-filter**: the store searches with the request's own conditions only (`rest`), `k` plus a few
   more candidates (`first_depth`), and each hit is checked against the permission conditions in
   Python, on the hit's own stored metadata, with the semantics of `rag.base.filters.matches` (the
   evaluator of the in-memory store; a hit without permission keys is kept only where the filter says
   unlabeled chunks are public, as the native filter does). The candidates are ordered, and the
   permitted ones keep their order, so when `k` survive they are the top `k` of the permitted chunks.
   When the search returned fewer candidates than it asked for, it saw every chunk `rest` allows, so
   what survives is the whole answer.
2. **deepened**: too few survived, and the share that did says a deeper list would hold `k` at a cost
   below the native filter's (`deepen_to`): the store lists more candidates (ids and distances only)
   and reads the text and metadata of the new ones; the permitted ones of the deeper list, in its order.
3. **native**: the principal may read too few chunks for that: the store's own filtered search with the
   whole filter (correct, slower).

Every stage that reads chunks still gets the whole filter; the plan only decides how a search applies it.

Example:
    >>> from rag.base.acl import Principal
    >>> from rag.base.filters import and_filters
    >>> plan = PermissionPlan.of(and_filters({"year": 2024}, Principal("ann", groups=["ops"]).filter()))
    >>> plan.rest, plan.branches
    ({'year': {'$eq': 2024}}, 3)
    >>> plan.allows({"year": 2024, "acl_public": False, "acl_g_ops": True}), plan.allows({"acl_public": False})
    (True, False)
    >>> PermissionPlan.of({"year": 2024}) is None     # no permission conditions: nothing to plan
    True
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.documents import Document

from rag.base.acl import ACL_PREFIX
from rag.base.filters import Filter, and_filters, matches_canonical, validate_filter
from rag.base.tracing import note_stage
from rag.stores.permission_index import granted_keys

__all__ = ["FIRST_EXTRA", "PermissionPlan", "deepen_to", "exact_too_many", "first_depth", "note_exact",
           "planned_search"]

#: Candidates beyond `k` the first search asks for: max(FIRST_EXTRA, k // 32). Chroma reads each hit's text and
#: metadata (~0.035 ms per hit at 100,000 chunks idle, ~0.15 ms under load): 4 * k more would add 10-45 ms to every
#: request even for a principal who reads everything; a few more absorb the few chunks such a principal may not
#: read, and a principal who reads less gets a deeper list (`deepen_to`) instead.
FIRST_EXTRA = 4
#: Rows x branches of the native filter that cost as much as reading one more candidate on Chroma: a deeper list is
#: read only when it costs less than the native filter would. Measured at 100,000 chunks under a load of 9-11 on 2
#: cores (bench/acl.py --compare-native, CPU time of the process): a 5-group principal (7 branches) cost +511 ms
#: deepened to ~4,000 candidates against +321 ms natively (a candidate ~280 row-branches: it goes native), 50 groups
#: (52 branches) +190 ms deepened against +2,684 ms natively (idle: a candidate's text and metadata ~0.035 ms, a
#: 2-branch `$or` ~120 ms, ~60).
ROW_BRANCHES_PER_CANDIDATE = 300
#: How much deeper than the observed share of permitted hits says (a share from a short list is noisy).
DEEPEN_SLACK = 1.25
#: At most this many deeper lists before the native filter (each at least twice as deep, and each cheaper than it).
DEEPEN_ROUNDS = 4
#: Off: every store answers the whole filter natively (what the tests compare the plan's answers with).
ENABLED = True
_PLANS: OrderedDict[int, tuple[Any, Any]] = OrderedDict()
_PLANS_LOCK = threading.Lock()
_PLANS_KEPT = 64
#: How many searches in a row a principal whose search went native goes straight to the native filter on that store
#: (its first list would cost a search for nothing: on FTS5 one more ranking of every match) before trying the lists.
NATIVE_AGAIN = 16
_NATIVE: OrderedDict[tuple[int, int], tuple[Any, int]] = OrderedDict()
_MANY: OrderedDict[tuple[int, int], tuple[Any, int]] = OrderedDict()
#: the fewest candidates one read of a deeper list asks for (one Chroma `get` costs milliseconds however few)
_MIN_BATCH = 64


def first_depth(k: int) -> int:
    """How many candidates the first search asks for (see `FIRST_EXTRA`)."""
    return k + max(FIRST_EXTRA, k // 32)


def deepen_to(k: int, seen: int, kept: int, *, stored: int, branches: int,
              candidate_cost: float | None = None, slack: float = DEEPEN_SLACK, round_cost: float = 0.0) -> int | None:
    """The depth of the next, deeper candidate list, or None when reading it costs more than the native filter.

    `seen` candidates gave `kept` permitted ones; the share read from them is taken optimistically ((kept + 2) /
    seen: a short list says little) and the list at least doubles. `stored` chunks are in the store and the
    permission conditions have `branches` comparisons (what the native filter's cost grows with); one more
    candidate costs as much as `candidate_cost` of those comparisons on one chunk (the store's;
    `ROW_BRANCHES_PER_CANDIDATE` on Chroma); the depth is `slack` times what the share says. A store whose deeper
    list costs a pass over every chunk (FTS5 ranks every match again) says what it costs per chunk stored, in
    branches: `round_cost`.

    Example:
        >>> deepen_to(100, 112, 20, stored=100_000, branches=7)    # 20 of 112 permitted: ~510 more
        626
        >>> deepen_to(100, 112, 0, stored=100_000, branches=2) is None    # none of 112: the native filter is cheaper
        True
    """
    candidate_cost = ROW_BRANCHES_PER_CANDIDATE if candidate_cost is None else candidate_cost
    share = (kept + 2) / max(seen, 1)
    depth = max(2 * seen, seen + math.ceil((k - kept) / share * slack) + FIRST_EXTRA)
    if depth * candidate_cost + stored * round_cost > stored * branches:
        return None
    return depth


def _acl_only(node: Any) -> bool:
    """Whether a canonical filter names only permission keys (`acl_*`)."""
    (key, value), = node.items()
    if key in ("$and", "$or"):
        return all(_acl_only(part) for part in value)
    if key == "$not":
        return _acl_only(value)
    return key.startswith(ACL_PREFIX)


def _conjuncts(node: Any) -> list[Any]:
    (key, value), = node.items()
    return [c for part in value for c in _conjuncts(part)] if key == "$and" else [node]


@dataclass(frozen=True)
class PermissionPlan:
    """A filter split into the request's own conditions (`rest`, the store's native filter) and the permission
    conditions (`permission`, checked per hit by `allows`); `branches` is how many comparisons they hold."""

    rest: dict[str, Any] | None
    permission: dict[str, Any]
    allows: Callable[[Mapping[str, Any]], bool]
    branches: int
    #: the keys of which a chunk must hold one as true, when that is the whole permission condition (a principal's
    #: filter without `public_by_default`: `rag.stores.permission_index.granted_keys`), else None
    keys: tuple[str, ...] | None = None

    @classmethod
    def of(cls, flt: Mapping[str, Any] | None) -> PermissionPlan | None:
        """The plan of a filter, or None when it has no condition on a permission key (`acl_*`)."""
        canon = validate_filter(flt)
        if canon is None or not ENABLED:
            return None
        parts = [(part, _part(part)) for part in _conjuncts(canon)]
        permission = [(part, info) for part, info in parts if info is not None]
        if not permission:
            return None
        checks = [check for _, (check, _, _) in permission]
        allows = checks[0] if len(checks) == 1 else (lambda md: all(check(md) for check in checks))
        return cls(and_filters(*(part for part, info in parts if info is None)),
                   and_filters(*(part for part, _ in permission)), allows,
                   sum(branches for _, (_, branches, _) in permission),
                   permission[0][1][2] if len(permission) == 1 else None)


def _part(part: dict[str, Any]) -> tuple[Callable[[Mapping[str, Any]], bool], int, tuple[str, ...] | None] | None:
    """For a conjunct naming only permission keys: its check (`matches_canonical` as a function), how many
    comparisons it holds and its keys that must be true (`granted_keys`); None for any other conjunct. A shared filter's (a principal's, one object for all its
    requests, `rag.base.acl`) is remembered by identity: 1,000 groups are read once, not per request."""
    with _PLANS_LOCK:
        found = _PLANS.get(id(part))
        if found is not None and found[0] is part:
            _PLANS.move_to_end(id(part))
            return found[1]
    info = ((_fast(part) or (lambda md: matches_canonical(md, part)), _comparisons(part), granted_keys(part))
            if _acl_only(part) else None)
    if type(part) is Filter:   # (read-only: the answer stays true)
        with _PLANS_LOCK:
            _PLANS[id(part)] = (part, info)
            while len(_PLANS) > _PLANS_KEPT:
                _PLANS.popitem(last=False)
    return info


def _comparisons(node: Any) -> int:
    (key, value), = node.items()
    if key in ("$and", "$or"):
        return sum(_comparisons(part) for part in value)
    return _comparisons(value) if key == "$not" else 1


def _fast(part: dict[str, Any]) -> Callable[[Mapping[str, Any]], bool] | None:
    """The set-lookup form of an `$or` of `{key: {"$eq": True}}` and `{key: {"$ne": False}}` (else None).

    `matches` reads `key $eq true` as "the value is the boolean true" (`md.get(key) is True`) and `key $ne false`
    as "missing, or not the boolean false" (`md.get(key) is not False`); booleans are never numbers.
    """
    (op, clauses), = part.items()
    if op != "$or":
        clauses = [part]
    true_keys, not_false = set(), []
    for clause in clauses:
        (key, cond), = clause.items()
        if key.startswith("$") or len(cond) != 1:
            return None
        (cmp, value), = cond.items()
        if (cmp, value) == ("$eq", True) and value is True:
            true_keys.add(key)
        elif (cmp, value) == ("$ne", False) and value is False:
            not_false.append(key)
        else:
            return None
    keys = frozenset(true_keys)

    def allows(md: Mapping[str, Any]) -> bool:
        if any(md.get(key, None) is not False for key in not_false):
            return True
        if len(md) <= len(keys):
            return any(value is True and key in keys for key, value in md.items())
        return any(md.get(key) is True for key in keys)

    return allows


Hits = list[tuple[Document, float]]


def planned_search(plan: PermissionPlan, k: int, *, search: Callable[[int], tuple[Hits, int]],
                   ranked: Callable[[int], list[tuple[str, float]]], read: Callable[[Sequence[str]], list[Document]],
                   native: Callable[[], Hits], stored: Callable[[], int],
                   candidate_cost: float | None = None, slack: float = DEEPEN_SLACK,
                   round_cost: float = 0.0, memo: Any = None, first: int | None = None) -> tuple[Hits, str]:
    """The top `k` hits the whole filter allows, and which path found them ("post-filter", "deepened", "native").

    The store's callables, each with the request's own conditions (`plan.rest`) as its native filter:
    `search(n)`: the `n` closest hits (document, score) and how many the engine returned (phantoms included);
    `ranked(n)`: the `n` closest as (id, score) only; `read(ids)`: those chunks' documents; `native()`: the search
    with the whole filter; `stored()`: how many chunks the store holds; `candidate_cost`, `slack`, `round_cost`: see
    `deepen_to`; `memo`: the store (a principal whose last search there went native goes native again, up to
    `NATIVE_AGAIN` times, without the lists first); `first`: how deep the first list goes when the store knows
    the principal's share (at least `first_depth(k)`)
    (a deeper list is read in its order, in batches, only as far as `k` permitted hits: a store whose ranked list
    costs little beyond its first search asks a deeper one, `slack`, to need fewer rounds).
    """
    start = time.perf_counter()
    if _went_native(memo, plan):   # (this principal's last search here found too few in the lists: skip them)
        return _done(native(), "native", k, start)
    depth = max(first_depth(k), first or 0)
    hits, returned = search(depth)
    kept = [hit for hit in hits if plan.allows(hit[0].metadata)]
    if len(kept) >= k or returned < depth:
        return _done(kept[:k], "post-filter", depth, start)
    known, total = {doc.id: doc for doc, _ in hits}, None
    for _ in range(DEEPEN_ROUNDS):
        total = stored() if total is None else total
        deeper = deepen_to(k, len(hits), len(kept), stored=total, branches=plan.branches,
                           candidate_cost=candidate_cost, slack=slack, round_cost=round_cost)
        if deeper is None:
            break
        order = ranked(deeper)
        hits, kept = _walk(order, k, known, read, plan.allows)
        if len(kept) >= k or len(order) < deeper:
            return _done(kept[:k], "deepened", deeper, start)
    _went_native(memo, plan, now=True)
    return _done(native(), "native", k, start)


def _went_native(memo: Any, plan: PermissionPlan, *, now: bool = False) -> bool:
    """Whether to go straight to the native filter: `memo`'s (a store's) last search with this same permission
    filter (a principal's, one shared object) went native, fewer than `NATIVE_AGAIN` searches ago. With `now`,
    remember that it went native. Only the speed depends on it: every path gives the same answer."""
    return _remembered(_NATIVE, memo, plan, now)


def _remembered(table: OrderedDict[tuple[int, int], tuple[Any, int]], memo: Any, plan: PermissionPlan,
                now: bool) -> bool:
    if memo is None or type(plan.permission) is not Filter:
        return False
    key = (id(memo), id(plan.permission))
    with _PLANS_LOCK:
        if now:
            table[key] = (plan.permission, 0)
            while len(table) > _PLANS_KEPT:
                table.popitem(last=False)
            return True
        found = table.get(key)
        if found is None or found[0] is not plan.permission:
            return False
        if found[1] + 1 >= NATIVE_AGAIN:   # (look again: the permissions or the questions may have changed)
            del table[key]
            return False
        table[key] = (found[0], found[1] + 1)
        return True


def _walk(order: list[tuple[str, float]], k: int, known: dict[str, Document],
          read: Callable[[Sequence[str]], list[Document]], allows: Callable[[Mapping[str, Any]], bool]) -> tuple[Hits, Hits]:
    """The candidates of `order` read in its order (those not `known` in batches sized by the share permitted so
    far) until `k` permitted ones: (the candidates read, the permitted ones), both in `order`'s order."""
    hits: Hits = []
    kept: Hits = []
    at = 0
    while at < len(order) and len(kept) < k:
        share = (len(kept) + 2) / max(len(hits), 1) if hits else 1.0
        batch = order[at:at + max(_MIN_BATCH, math.ceil((k - len(kept)) / min(share, 1.0) * DEEPEN_SLACK))]
        at += len(batch)
        known.update((doc.id, doc) for doc in read([id_ for id_, _ in batch if id_ not in known]))
        for id_, score in batch:
            doc = known.get(id_)
            if doc is not None:
                hits.append((doc, score))
                if allows(doc.metadata):
                    kept.append((doc, score))
    return hits, kept


def exact_too_many(memo: Any, plan: PermissionPlan, *, now: bool = False) -> bool:
    """Whether `memo`'s (a store's) last look at this principal's permitted share found it too large for the search
    over the permitted chunks, fewer than `NATIVE_AGAIN` searches ago (looking costs a lookup per key: ~1 ms for 1,000
    groups); with `now`, remember that it did. Only the speed depends on it: every path gives the same answer."""
    return _remembered(_MANY, memo, plan, now)


def note_exact(candidates: int, start: float, *, path: str = "exact") -> None:
    """Report a search that read which chunks are permitted beside the store (`rag.stores.permission_index`) like
    `planned_search`'s paths: "exact" (over the permitted chunks only; `candidates`: at most how many) or
    "over-fetch" (the store's list read deeper, checked there; `candidates`: how deep)."""
    note_stage(permission_plan=path, permission_candidates=candidates,
               seconds={f"permission_plan.{path}": time.perf_counter() - start})


def _done(hits: Hits, path: str, depth: int, start: float) -> tuple[Hits, str]:
    """Report the path to the open stage: `permission_plan` (the span's attribute) and the timing
    `permission_plan.<path>` (the pipeline's `RAGResult.timings`)."""
    note_stage(permission_plan=path, permission_candidates=depth,
               seconds={f"permission_plan.{path}": time.perf_counter() - start})
    return hits, path
