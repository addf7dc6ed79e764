"""The shape of the codebase: layers (import-linter), no import cycles, small modules and functions."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def test_layers_contract_is_kept():
    lint = Path(sys.executable).with_name("lint-imports")
    run = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "Contracts: 2 kept, 0 broken." in run.stdout
    assert "the offline fallback is imported by the answerer factory only KEPT" in run.stdout


def _layers() -> list[list[str]]:
    """The floors, top first, as pyproject.toml's import-linter contract declares them."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    contract = next(c for c in config["contracts"] if c["type"] == "layers")
    return [[name.strip() for name in re.split(r"[|:]", layer)] for layer in contract["layers"]]


def _floor_of(module: str, floors: dict[str, int]) -> int | None:
    while module:
        if module in floors:
            return floors[module]
        module = module.rpartition(".")[0]
    return None


#: the whole import graph, counting the imports made only for type checkers, with nothing removed
GRAPH = grimp.build_graph("rag", exclude_type_checking_imports=False, cache_dir=None)


def test_no_import_cycles_between_modules():
    """No circle at all, counting the imports made only for type checkers; nothing ignored."""
    cycles = set()
    for module in GRAPH.modules:
        for imported in GRAPH.find_modules_directly_imported_by(module):
            if GRAPH.chain_exists(importer=imported, imported=module):
                cycles.add(tuple(sorted((module, imported))))
    assert not cycles, f"import cycles: {sorted(cycles)}"


def test_no_import_points_up_a_floor():
    """Every import (type-checking ones too) stays on its floor or goes down; nothing ignored."""
    floors = {module: depth for depth, layer in enumerate(_layers()) for module in layer}
    upward = []
    for importer in GRAPH.modules:
        below = _floor_of(importer, floors)
        for imported in GRAPH.find_modules_directly_imported_by(importer):
            above = _floor_of(imported, floors)
            if below is not None and above is not None and above < below:
                upward.append(f"{importer} -> {imported}")
    assert not upward, f"imports up a floor: {sorted(upward)}"
    assert floors["rag.config"] > floors["rag.compose.generator"] and floors["rag.config"] < floors["rag.compose.resource"]


def _sizes() -> tuple[list[str], list[str]]:
    long_modules, long_functions = [], []
    for path in sorted((ROOT / "rag").rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        rel = path.relative_to(ROOT)
        if len(source.splitlines()) > MAX_MODULE_LINES:
            long_modules.append(f"{rel} ({len(source.splitlines())} lines)")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long_functions.append(f"{rel}:{node.lineno} {node.name} ({length} lines)")
    return long_modules, long_functions


def test_modules_and_functions_stay_small():
    long_modules, long_functions = _sizes()
    assert not long_modules, f"modules over {MAX_MODULE_LINES} lines: {long_modules}"
    assert not long_functions, f"functions over {MAX_FUNCTION_LINES} lines: {long_functions}"


def test_only_the_store_module_touches_private_store_attributes():
    offenders = []
    for path in sorted((ROOT / "rag").rglob("*.py")):
        if path.parent.name == "stores":
            continue
        source = path.read_text(encoding="utf-8")
        if re.search(r"(?<!self)\._collection\b", source) or "_chroma_collection_name" in source:
            offenders.append(str(path.relative_to(ROOT)))
    assert not offenders, f"reach into private store attributes outside rag/stores: {offenders}"


def test_every_public_name_a_module_exports_exists():
    """`__all__` names only what the module defines (else `from module import *` raises)."""
    import importlib
    import pkgutil

    import rag

    missing = []
    for info in pkgutil.walk_packages(rag.__path__, "rag."):
        try:
            module = importlib.import_module(info.name)
        except ImportError:   # an optional extra that is not installed
            continue
        missing += [f"{info.name}.{name}" for name in getattr(module, "__all__", ())
                    if isinstance(name, str) and not hasattr(module, name) and name not in getattr(module, "_LAZY", {})]
    assert not missing, f"__all__ names that do not exist: {missing}"
