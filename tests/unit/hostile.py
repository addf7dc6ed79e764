"""Hypothesis strategies for hostile input, shared by the filter, config, CLI and server tests.

`any_json` is anything a JSON body (or `json.loads` with its NaN extension) can hold, with the
dialect's operators mixed into the keys so generated values reach deep into validation.
`valid_filters` / `metadatas` draw from small pools so filters actually select something.
`hostile_filters` is the class of inputs the issue reported (non-finite numbers, mixed `$in`
lists, lone surrogates, deep nesting), each generated in many variants.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from rag.base.filters import COMPARISON_OPERATORS, LOGICAL_OPERATORS, MAX_FILTER_DEPTH

OPERATORS = list(COMPARISON_OPERATORS + LOGICAL_OPERATORS)
FIELDS = ["a", "b", "c"]

# ---------------------------------------------------------------- anything JSON can hold
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8))
json_keys = st.one_of(st.sampled_from(OPERATORS + FIELDS + ["$gtt", "", "$"]), st.text(max_size=6))
any_json = st.recursive(json_scalars, lambda children: st.one_of(
    st.lists(children, max_size=4), st.dictionaries(json_keys, children, max_size=4)), max_leaves=25)

# ---------------------------------------------------------------- valid filters and matching metadata
# Numbers are kept within +-2**53, where Chroma and Python compare ints and floats the same way.
_ints = st.one_of(st.sampled_from([-1, 0, 1, 2, 3]), st.integers(-(2**53), 2**53))
_floats = st.one_of(st.sampled_from([-1.5, 0.0, 0.5, 1.0, 2.5]), st.floats(-1e15, 1e15, allow_nan=False))
_strings = st.one_of(st.sampled_from(["x", "y", "", "1", "é"]), st.text(max_size=4).filter(lambda s: "\x00" not in s))
values = st.one_of(_ints, _floats, st.booleans(), _strings)
_numbers = st.one_of(_ints, _floats)
_lists = st.one_of(st.lists(_ints, min_size=1, max_size=4), st.lists(_numbers, min_size=1, max_size=4),
                   st.lists(_strings, min_size=1, max_size=4), st.lists(st.booleans(), min_size=1, max_size=2))


@st.composite
def _condition(draw: st.DrawFn) -> Any:
    op = draw(st.sampled_from([None, *COMPARISON_OPERATORS]))
    if op is None:
        return draw(values)
    if op in ("$in", "$nin"):
        return {op: draw(_lists)}
    if op in ("$gt", "$gte", "$lt", "$lte"):
        return {op: draw(_numbers)}
    return {op: draw(values)}


_leaf = st.dictionaries(st.sampled_from(FIELDS), _condition(), min_size=1, max_size=2)
valid_filters = st.recursive(_leaf, lambda children: st.one_of(
    st.builds(lambda fs: {"$and": fs}, st.lists(children, min_size=1, max_size=3)),
    st.builds(lambda fs: {"$or": fs}, st.lists(children, min_size=1, max_size=3)),
    st.builds(lambda f: {"$not": f}, children)), max_leaves=8)
metadatas = st.lists(st.dictionaries(st.sampled_from(FIELDS), values, max_size=3), min_size=1, max_size=8)


# ---------------------------------------------------------------- the reported classes of hostile filters
def nested(depth: int, op: str = "$and", leaf: dict[str, Any] | None = None) -> dict[str, Any]:
    """`op` nested `depth` levels deep around a one-field filter."""
    flt: dict[str, Any] = leaf or {"a": 1}
    for _ in range(depth):
        flt = {"$not": flt} if op == "$not" else {op: [flt]}
    return flt


_non_finite = st.sampled_from([float("nan"), float("inf"), float("-inf")])
_surrogate_text = st.builds(lambda pre, s, post: pre + s + post, st.text(max_size=3),
                            st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), st.text(max_size=3))
_mixed_list = st.lists(st.one_of(st.text(max_size=3), st.booleans(), _ints), min_size=2, max_size=5).filter(
    lambda vs: len({"b" if isinstance(v, bool) else "s" if isinstance(v, str) else "n" for v in vs}) > 1)
_op = st.sampled_from(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte"])
_where = st.sampled_from(FIELDS)
hostile_filters = st.one_of(
    st.builds(lambda f, op, v: {f: {op: v}}, _where, _op, _non_finite),
    st.builds(lambda f, op, v: {f: {op: [1.0, v]}}, _where, st.sampled_from(["$in", "$nin"]), _non_finite),
    st.builds(lambda f, op, vs: {f: {op: vs}}, _where, st.sampled_from(["$in", "$nin"]), _mixed_list),
    st.builds(lambda f, v: {f: v}, _where, _surrogate_text),
    st.builds(lambda k: {k: 1}, _surrogate_text),
    st.builds(lambda f, v: {f: {"$in": ["ok", v]}}, _where, _surrogate_text),
    st.builds(lambda f, v: {f: v}, _where, st.one_of(st.integers(min_value=2**63), st.integers(max_value=-(2**63) - 1))),
    st.builds(nested, st.integers(MAX_FILTER_DEPTH, 400), st.sampled_from(["$and", "$or", "$not"])),
)
