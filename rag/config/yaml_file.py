"""Reading a config file: plain, bounded YAML that either loads or raises one `ConfigError`.

`yaml.safe_load` already refuses tags that run code; this loader also refuses what would make a
config mean something other than what it says, or cost far more than its size:

- a key written twice in one mapping (YAML keeps the last one silently, so a second `server:`
  block would drop the first one's `tenant_filter`); `<<` merge keys still override as usual;
- aliases that expand past `MAX_EXPANDED_NODES` values (a 522-byte "billion laughs" config
  would otherwise expand to a billion values);
- nesting deeper than `MAX_CONFIG_DEPTH` levels (the YAML composer is recursive);
- bytes that are not UTF-8, and files over `MAX_CONFIG_BYTES`.

Example:
    >>> load_yaml_text("a: 1\\nb: [x, y]\\n")
    {'a': 1, 'b': ['x', 'y']}
    >>> try:
    ...     load_yaml_text("server: {max_k: 5}\\nserver: {max_k: 50}\\n", source="demo.yaml")
    ... except ConfigError as err:
    ...     print(err)
    demo.yaml line 2: the key 'server' is written twice in one mapping (first on line 1); keep one
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from rag.base.errors import ConfigError, short_repr

__all__ = ["MAX_CONFIG_BYTES", "MAX_CONFIG_DEPTH", "MAX_EXPANDED_NODES", "load_yaml_text", "read_config_file"]

#: The largest config file accepted.
MAX_CONFIG_BYTES = 1_000_000
#: How deep mappings and lists may nest in a config.
MAX_CONFIG_DEPTH = 64
#: How many values (scalars, lists, mappings) a config may hold once its aliases are expanded.
MAX_EXPANDED_NODES = 100_000
_MERGE_TAG = "tag:yaml.org,2002:merge"


class _StrictLoader(yaml.SafeLoader):
    """`SafeLoader` with a depth bound while composing and a duplicate-key check while constructing."""

    def __init__(self, stream: str, source: str) -> None:
        super().__init__(stream)
        self.source = source
        self.depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        self.depth += 1
        try:
            if self.depth > MAX_CONFIG_DEPTH:
                mark = self.peek_event().start_mark
                raise ConfigError(f"{self.source} line {mark.line + 1}: values nest more than {MAX_CONFIG_DEPTH} "
                                  "levels deep; a config is a few levels of settings")
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG or not isinstance(key_node, ScalarNode):
                continue
            key = self.construct_object(key_node, deep=False)
            line = key_node.start_mark.line + 1
            if key in seen:  # compared as YAML reads them: `yes` and `true` are the same key
                raise ConfigError(f"{self.source} line {line}: the key {short_repr(key_node.value)} is written twice "
                                  f"in one mapping (first on line {seen[key]}); keep one")
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def _expanded_size(root: Node, limit: int) -> int:
    """How many nodes the tree has once every alias is expanded (linear: shared nodes are memoised)."""
    sizes: dict[int, int] = {}
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        if isinstance(node, SequenceNode):
            children = list(node.value)
        elif isinstance(node, MappingNode):
            children = [part for pair in node.value for part in pair]
        else:
            sizes[id(node)] = 1
            continue
        if children_done:
            sizes[id(node)] = min(limit + 1, 1 + sum(sizes[id(child)] for child in children))
        else:
            stack.append((node, True))
            stack.extend((child, False) for child in children if id(child) not in sizes)
    return sizes[id(root)]


def load_yaml_text(text: str, *, source: str = "config") -> Any:
    """Parse one YAML document with the rules above.

    Args:
        text: the YAML text.
        source: how messages name the text (usually the file path).

    Raises:
        ConfigError: not valid YAML, a duplicate key, an alias bomb or too deep a nesting.
    """
    loader = _StrictLoader(text, source)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        size = _expanded_size(node, MAX_EXPANDED_NODES)
        if size > MAX_EXPANDED_NODES:
            raise ConfigError(f"{source}: its aliases (*name) expand to more than {MAX_EXPANDED_NODES} values; "
                              "write the repeated settings out, or reuse fewer of them")
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML (only plain YAML is accepted, no tags): {exc}") from None
    finally:
        loader.dispose()


def read_config_file(path: str | Path) -> Any:
    """Read a config file: a bounded size, UTF-8 text, then `load_yaml_text`.

    Raises:
        ConfigError: the file is missing, too large, not UTF-8 or not acceptable YAML.
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"no config file at {str(path)!r}")
    if path.stat().st_size > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: config files are limited to {MAX_CONFIG_BYTES} bytes")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise ConfigError(f"{path} line {line}: byte {exc.start} ({raw[exc.start]:#04x}) is not UTF-8; "
                          "save the config as UTF-8") from None
    return load_yaml_text(text, source=str(path))
