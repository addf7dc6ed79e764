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
    "rag.stores.chroma", "rag.stores.memory", "rag.stores.partitioned", "rag.stores.inmemory"}
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
    assert registry.having(Capability.STORED_VECTORS) == ["chroma"]
    assert set(registry.having(Capability.ASYNC_SEARCH)) == set(registry.names())
