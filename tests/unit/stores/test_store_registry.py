"""No module outside `rag/stores` knows a backend: it imports no backend module and names no backend.

A backend is known in one place, `rag.stores.registry`. Outside `rag/stores`, the source of
`rag/` is read (AST, docstrings and comments excluded, so prose may mention Chroma) for:

- imports of a backend module (the registry's modules, `rag.stores.chroma`, the client module, and
  the store layouts `memory`, `partitioned`), and strings naming one (a lazy import);
- string constants equal to a backend's name (``"chroma"``, ``"pgvector"``, ...).

Allowed: the YAML dialect's `kind:` values, each written once as the `Literal` of a config model's
`kind` field in the configuration package (the kind -> model maps are derived from them,
`kind_of`); `test_config_store_kinds_are_registered_backends` pins that every store kind a config
accepts is a registered backend, so a config cannot name a backend the registry does not have. And
`ALLOWED`, per file, with the reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

from rag.stores import registry

ROOT = Path(__file__).resolve().parents[3] / "rag"
BACKEND_MODULES = {registry.backend(n).module for n in registry.names()} | {
    "rag.stores.chroma", "rag.stores.chroma_collection", "rag.stores.memory", "rag.stores.partitioned", "rag.stores.inmemory"}
#: file (relative to rag/) -> backend names it may hold as string constants, and why
ALLOWED: dict[str, set[str]] = {
    "testing/chroma_server.py": {"chroma"},   # the `chroma` executable that starts a Chroma server for tests
}


def _outside_stores() -> list[Path]:
    return [p for p in sorted(ROOT.rglob("*.py")) if p.relative_to(ROOT).parts[0] != "stores"]


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def _kind_literals(tree: ast.AST, rel: Path) -> set[int]:
    """The string constants of `Literal[...]` annotations, in the configuration package (the YAML kinds)."""
    if rel.parts[0] != "config":
        return set()
    return {id(c) for node in ast.walk(tree) if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
            and node.value.id == "Literal" for c in ast.walk(node.slice) if isinstance(c, ast.Constant)}


def _offences(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs, names, found = _docstrings(tree) | _kind_literals(tree, path.relative_to(ROOT)), set(registry.names()), []
    allowed = ALLOWED.get(str(path.relative_to(ROOT)), set())
    for node in ast.walk(tree):
        modules = []
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        found += [f"{path.relative_to(ROOT)}:{node.lineno} imports {m}" for m in modules if m in BACKEND_MODULES]
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            if node.value in names and node.value not in allowed:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} names the backend {node.value!r}")
            if node.value in BACKEND_MODULES:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} names the module {node.value!r}")
    return found


def test_no_module_outside_rag_stores_imports_or_names_a_backend():
    offences = [o for path in _outside_stores() for o in _offences(path)]
    assert not offences, "backend knowledge outside rag/stores (ask rag.stores.registry):\n" + "\n".join(offences)


def test_the_check_finds_what_it_looks_for(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text('"""Chroma is fine in prose."""\nfrom rag.stores.chroma import new_chroma\n'
                   'import rag.stores.qdrant\nif kind == "pgvector":\n    pass\nLAZY = {"x": "rag.stores.memory"}\n')
    global ROOT
    root, ROOT = ROOT, tmp_path
    try:
        found = _offences(bad)
    finally:
        ROOT = root
    assert [o.split(" ", 1)[1] for o in found] == [
        "imports rag.stores.chroma", "imports rag.stores.qdrant", "names the backend 'pgvector'",
        "names the module 'rag.stores.memory'"]


def test_every_backend_module_is_registered_once_and_imported_lazily():
    import subprocess
    import sys

    names = registry.names()
    assert len(set(names)) == len(names) and registry.DEFAULT in names
    code = ("import sys, rag.stores.registry as r; r.names(); r.backend('qdrant'); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('chromadb', 'qdrant_client', 'pymilvus', "
            "'lancedb', 'faiss', 'langchain_postgres', 'langchain_chroma')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    for name in names:
        module = registry.backend(name).load()
        assert hasattr(module, "STORE") and hasattr(module, "open_store") and hasattr(module, "scratch_store"), name
        assert module.STORE.backend == name


def test_config_store_kinds_are_registered_backends():
    from rag.config.rag_config import RESOURCE_KINDS
    from rag.config.stores import STORE_KINDS

    assert set(STORE_KINDS) <= set(registry.names())
    assert registry.DEFAULT in RESOURCE_KINDS   # the default backend's kind (a directory of its own)
    other = {"chroma_server", "knowledge_base", "bm25", "hybrid"}   # a server of the default backend; not stores
    assert set(RESOURCE_KINDS) - other == set(STORE_KINDS) | {registry.DEFAULT}


def test_the_pipeline_reads_declared_capabilities_and_probes_none():
    """`asearch`, `get_vectors` and `from_connection` are declared (`Capability`), never looked for with hasattr."""
    import re
    from pathlib import Path

    from rag.stores.chunk_store import Capability

    root = Path(registry.__file__).resolve().parents[1]
    probe = re.compile(r"(hasattr|getattr)\([^)]*[\"'](asearch|get_vectors|from_connection|chunks_of)[\"']")
    probes = [f"{path.relative_to(root)}:{n}" for path in sorted(root.rglob("*.py"))
              for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if probe.search(line)]
    assert probes == []
    assert registry.having(Capability.WORKER_CONNECTION) == ["chroma", "pgvector"]
    assert registry.having(Capability.STORED_VECTORS) == ["chroma", "pgvector", "inmemory"]
    assert set(registry.having(Capability.ASYNC_SEARCH)) == set(registry.names())


def test_a_backend_module_has_exactly_the_module_capabilities_it_declares():
    """`OWN_DIRECTORY` (a knowledge base's chunks in its own directory) is declared in the registration, and its
    module has every function of `DirectoryBackend`; a module that does not declare it has none of them. The
    default backend declares it; asking another for its directory functions says which backends can."""
    import pytest

    from rag.base.errors import ConfigError
    from rag.stores.chunk_store import Capability

    for name in registry.names():
        entry, module = registry.backend(name), registry.backend(name).load()
        has = [f for f in registry.DIRECTORY_FUNCTIONS if callable(getattr(module, f, None))]
        declared = Capability.OWN_DIRECTORY in entry.capabilities
        assert has == (list(registry.DIRECTORY_FUNCTIONS) if declared else []), name
    assert Capability.OWN_DIRECTORY in registry.backend(registry.DEFAULT).capabilities
    assert registry.having(Capability.OWN_DIRECTORY) == [registry.DEFAULT]
    with pytest.raises(ConfigError, match="keeps no store in a directory of its own; valid: chroma"):
        registry.directory_backend("qdrant")


def test_the_store_core_is_small_and_the_rest_is_shared_or_declared():
    """The contract's three parts do not overlap, and every member of the old contract is in one of them."""
    from rag.stores.chunk_store import CORE, OPTIONAL, SHARED, ChunkStore

    assert len(CORE) == 8 and not set(CORE) & set(SHARED)
    assert set(ChunkStore.__annotations__) | {n for n in vars(ChunkStore) if not n.startswith("_")} >= set(CORE)
    old = {"backend", "can_update", "capabilities", "add", "upsert", "delete", "get_by_ids", "get_documents",
           "get_ids", "get_metadatas", "update_metadatas", "count", "search", "vectorstore", "connection_spec",
           "check", "rebuild"}   # (the 17 of ChunkStore before issue 41; can_update became UPDATE_METADATA)
    assert old - {"can_update"} <= set(CORE) | set(SHARED) | set(OPTIONAL.values())


def test_no_code_reads_the_deprecated_can_update():
    """`can_update` is a deprecated alias of `Capability.UPDATE_METADATA in store.capabilities`."""
    uses = [f"{path.relative_to(ROOT)}:{n}" for path in sorted(ROOT.rglob("*.py"))
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            if ".can_update" in line and "can_update_metadata" not in line]
    assert uses == []


def test_a_backend_written_with_can_update_false_keeps_working():
    """The old declaration (`can_update = False`) is read as `update_metadata` left out, with a warning."""
    import pytest
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_core.vectorstores import InMemoryVectorStore

    from rag.base.errors import ConfigError
    from rag.stores.chunk_store import Capability
    from rag.stores.inmemory import InMemoryChunks

    with pytest.warns(DeprecationWarning, match="can_update = False is deprecated"):
        class OldStyle(InMemoryChunks):
            can_update = False

    chunks = OldStyle(InMemoryVectorStore(DeterministicFakeEmbedding(size=4)))
    assert Capability.UPDATE_METADATA not in chunks.capabilities and not chunks.can_update
    assert Capability.ASYNC_SEARCH in chunks.capabilities
    chunks.add(["a" * 32], [[1.0, 0.0, 0.0, 0.0]], ["x"], [{"n": 1}])
    with pytest.raises(ConfigError, match="cannot update metadata in place"):
        chunks.update_metadatas(["a" * 32], [{"n": 2}])
