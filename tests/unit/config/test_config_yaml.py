"""Config files under hostile input: every problem is one ConfigError, cheap, and says where.

Generated cases (Hypothesis, fixed example counts) cover the classes of input from the
hardening issue: duplicate keys anywhere, alias bombs of any width and depth, bytes that are not
UTF-8, and nesting of any style past the bound.
"""

from __future__ import annotations

import string
import tracemalloc

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag.base.errors import MAX_MESSAGE_CHARS, ConfigError
from rag.config.rag_config import load_config
from rag.config.yaml_file import MAX_CONFIG_DEPTH, MAX_EXPANDED_NODES, load_yaml_text

_tmp = [HealthCheck.function_scoped_fixture]
_names = st.text(string.ascii_lowercase + "_", min_size=1, max_size=8).map(lambda s: f"k{s}")  # not null/yes/...


def _write(tmp_path, data: bytes | str):
    path = tmp_path / "config.yaml"
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def test_two_server_blocks_are_an_error_naming_the_key_and_both_lines(tmp_path):
    path = _write(tmp_path, "resources: [{name: d, kind: chroma, path: s}]\n"
                            "server:\n  tenant_filter: {tenant: acme}\n"
                            "server:\n  max_k: 5\n")
    with pytest.raises(ConfigError, match=r"line 4: the key 'server' is written twice in one mapping \(first on line 2\)"):
        load_config(path)


@settings(max_examples=100, deadline=None)
@given(path=st.lists(_names, min_size=0, max_size=4), key=_names, gap=st.lists(_names, max_size=3, unique=True),
       flow=st.booleans())
def test_a_duplicate_key_at_any_depth_and_style_is_an_error(path, key, gap, flow):
    others = {g: 1 for g in gap if g != key}
    if flow:
        inner = "{" + ", ".join([f"{key}: 1", *(f"{g}: 2" for g in others), f"{key}: 3"]) + "}"
        text = "".join(f"{{{p}: " for p in path) + inner + "}" * len(path)
    else:
        indent = "  " * len(path)
        text = "".join(f"{'  ' * i}{p}:\n" for i, p in enumerate(path))
        text += "".join(f"{indent}{k}: 1\n" for k in [key, *others, key])
    with pytest.raises(ConfigError, match=f"the key '{key}' is written twice"):
        load_yaml_text(text)


def test_keys_that_read_the_same_are_duplicates_named_as_written():
    with pytest.raises(ConfigError, match="the key 'yes' is written twice"):
        load_yaml_text("true: 1\nyes: 2\n")
    with pytest.raises(ConfigError, match="the key 'null' is written twice"):
        load_yaml_text("~: 1\nnull: 2\n")


def test_merge_keys_still_override_as_yaml_intends():
    data = load_yaml_text("base: &b {k: 4, tenant: acme}\nserver:\n  <<: *b\n  k: 8\n")
    assert data["server"] == {"k": 8, "tenant": "acme"}


def _bomb(levels: int, width: int, leaf: str = "lol") -> str:
    text = f"l0: &l0 [{', '.join([leaf] * width)}]\n"
    for i in range(1, levels + 1):
        text += f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]\n"
    return text


def test_the_522_byte_alias_bomb_fails_fast_without_allocating(tmp_path):
    text = _bomb(9, 9) + "resources: [{name: d, kind: chroma, path: s}]\nserver: {tenant_filter: {tenant: *l9}}\n"
    assert len(text.encode()) < 700  # 9 levels of 9: ten billion values once expanded
    tracemalloc.start()
    try:
        with pytest.raises(ConfigError, match=f"aliases .* expand to more than {MAX_EXPANDED_NODES} values"):
            load_config(_write(tmp_path, text))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20_000_000  # bytes; the unbounded expansion took 489 MB


@settings(max_examples=40, deadline=None)
@given(levels=st.integers(2, 30), width=st.integers(2, 12))
def test_alias_bombs_of_any_shape_are_refused_or_small(levels, width):
    text = _bomb(levels, width)
    leaves = width ** (levels + 1)
    if leaves * 4 <= MAX_EXPANDED_NODES:  # small enough: loads as written
        assert len(load_yaml_text(text)[f"l{levels}"]) == width
    elif leaves > MAX_EXPANDED_NODES:  # a bomb: refused, briefly
        with pytest.raises(ConfigError, match="expand to more than") as info:
            load_yaml_text(text)
        assert len(str(info.value)) <= MAX_MESSAGE_CHARS


@settings(max_examples=60, deadline=None, suppress_health_check=_tmp)
@given(prefix=st.sampled_from(["version: 1\n", "# comment\n", "", "resources: []\n"]),
       bad=st.binary(min_size=1, max_size=20).filter(lambda b: not _is_utf8(b)))
def test_a_config_that_is_not_utf8_is_a_config_error_naming_the_line(tmp_path, prefix, bad):
    with pytest.raises(ConfigError, match="is not UTF-8; save the config as UTF-8"):
        load_config(_write(tmp_path, prefix.encode() + b"name: " + bad + b"\n"))


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@pytest.mark.parametrize("text", [
    "a: " + "[" * 100_000 + "]" * 100_000,
    "a: " + "{b: " * 100_000 + "1" + "}" * 100_000,
    "".join(" " * i + "- \n" for i in range(MAX_CONFIG_DEPTH + 2)),
    "".join(" " * i + f"k{i}:\n" for i in range(MAX_CONFIG_DEPTH + 2)),
], ids=["flow-lists", "flow-maps", "block-lists", "block-maps"])
def test_deep_nesting_is_a_config_error_not_a_recursion_error(tmp_path, text):
    with pytest.raises(ConfigError, match=f"nest more than {MAX_CONFIG_DEPTH} levels"):
        load_config(_write(tmp_path, text))


def test_nesting_within_the_bound_loads():
    depth = MAX_CONFIG_DEPTH - 1
    assert load_yaml_text("[" * depth + "]" * depth) is not None


@settings(max_examples=150, deadline=None, suppress_health_check=_tmp)
@given(st.text(alphabet=st.sampled_from(list("ab: -[]{}*&!|>'\"\n\t#%@`,?<")), max_size=60))
def test_any_text_loads_or_raises_a_config_error(tmp_path, text):
    try:
        load_config(_write(tmp_path, text))
    except ConfigError as err:
        assert len(str(err)) <= MAX_MESSAGE_CHARS


def test_values_quoted_in_config_errors_are_truncated(tmp_path):
    big = "x" * 500_000
    path = _write(tmp_path, f"resources: [{{name: d, kind: {big}, path: s}}]\nserver: {{tenant_filter: {{a: [{big}]}}}}\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert len(str(info.value)) <= MAX_MESSAGE_CHARS
    with pytest.raises(ConfigError) as info:
        load_config(_write(tmp_path, f"{big[:1000]}: 1\nresources: []\n"))  # YAML keys stop at 1024
    assert "unknown key" in str(info.value) and len(str(info.value)) < 500


def test_tags_that_would_run_code_are_still_refused():
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_yaml_text("a: !!python/object/apply:os.system ['true']\n")
    assert yaml.safe_load("a: 1") == load_yaml_text("a: 1")
