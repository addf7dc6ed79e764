"""The import paths and names users rely on (the seed's paths included)."""

from __future__ import annotations

import json

import rag


def test_seed_import_paths_work():
    from rag.compose.generator import RAG
    from rag.compose.resource import Resource
    from rag.core.errors import ConfigError, FilterError, RagError
    from rag.generation.rag_with_source import rag_chain_from_docs

    assert rag.RAG is RAG and rag.Resource is Resource and rag.rag_chain_from_docs is rag_chain_from_docs
    assert issubclass(FilterError, RagError) and issubclass(FilterError, ValueError)
    assert issubclass(ConfigError, RagError) and issubclass(ConfigError, ValueError)


def test_public_api_is_pinned():
    assert {"RAG", "Resource", "rag_chain_from_docs", "RagError", "FilterError", "ConfigError"} <= set(rag.__all__)
    for name in rag.__all__:
        assert hasattr(rag, name), name


def test_importing_rag_loads_no_model_and_no_client():
    import subprocess
    import sys

    code = ("import sys, rag; heavy = [m for m in ('torch', 'sentence_transformers', 'chromadb', 'llama_cpp', "
            "'openai', 'fastapi') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_rag_from_config_builds_the_subclass_it_is_called_on(tmp_path):
    from rag import RAG

    class MyRAG(RAG):
        pass

    cfg = {"version": 1, "embedding": {"kind": "deterministic"},
           "resources": [{"name": "notes", "kind": "chroma", "path": str(tmp_path / "store"), "create": True}],
           "extras": ["count_docs"]}
    built = MyRAG.from_config(cfg)
    assert type(built) is MyRAG and built.resource_names == ["notes"]
    assert set(built.chain().invoke("anything?")) == {"question", "answer", "context", "count_docs"}


def test_chain_and_get_chain_are_runnable_sequences(tmp_path):
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_core.runnables import RunnableSequence

    from rag import RAG, Resource

    rag = RAG(resources=[Resource.from_texts("notes", ["Rome is in Italy."], embedding=DeterministicFakeEmbedding(size=8))],
              extras={"n": lambda out: len(out["context"])})
    assert type(rag.chain()) is RunnableSequence and type(rag.get_chain()) is RunnableSequence
    built = rag.chain(retrieval_chain={"notes": {"search_kwargs": {"k": 1}}})
    assert type(built) is RunnableSequence and built.name == "RAG"
    assert built.steps[0].get_name() == "retrieve"


def test_seed_paths_are_two_line_re_exports_of_the_composition_floor():
    from pathlib import Path

    import rag.compose.generator
    import rag.compose.resource
    import rag.core.generator
    import rag.core.resource

    for shim in (rag.core.generator, rag.core.resource):
        lines = [line for line in Path(shim.__file__).read_text(encoding="utf-8").splitlines() if line.strip()]
        assert len(lines) == 2, f"{shim.__name__} should be a docstring and one re-export: {lines}"
    assert rag.core.generator.RAG is rag.compose.generator.RAG
    assert rag.core.resource.Resource is rag.compose.resource.Resource


def test_from_rag_import_rag_loads_no_configuration_command_line_or_server():
    import subprocess
    import sys

    code = "import json, sys; from rag import RAG; print(json.dumps(sorted(m for m in sys.modules if m.startswith('rag.'))))"
    modules = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    loaded = {m.split(".")[1] for m in modules}
    assert loaded.isdisjoint({"config", "cli", "server", "evaluation", "testing", "core"}), loaded
    assert "compose" in loaded
    # a chain reads a store; it does not load files, sync a knowledge base or open a backend package
    write_path = [m for m in modules if m.startswith(("rag.indexing.loaders", "rag.indexing.pdf", "rag.indexing.ocr",
                                                      "rag.indexing.sync", "rag.indexing.write_path",
                                                      "rag.indexing.kb_parts", "rag.compose.knowledge_base",
                                                      "rag.stores.chroma", "rag.stores.pgvector"))]
    assert not write_path, write_path


def test_type_checking_imports_cover_every_public_name():
    """Editors and type checkers see every name of `rag.__all__` (`if TYPE_CHECKING:` imports it from its home)."""
    import ast
    from pathlib import Path

    tree = ast.parse(Path(rag.__file__).read_text(encoding="utf-8"))
    block = next(node for node in tree.body if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING")
    typed = {alias.asname or alias.name: node.module for node in block.body if isinstance(node, ast.ImportFrom)
             for alias in node.names}
    eager = {alias.name for node in tree.body if isinstance(node, ast.ImportFrom) and node.module.startswith("rag.")
             for alias in node.names}   # the errors, imported at once
    assert set(rag.__all__) == set(typed) | eager
    assert typed == {name: rag._LAZY[name] for name in typed}   # from the module `__getattr__` imports it from
