"""The offline answerer's scores do not depend on Python's hash seed (a set's order): the same context gives the
same answer in every process. Found on a held-out corpus, where near-tied units swapped between runs."""

from __future__ import annotations

import os
import subprocess
import sys

SCRIPT = """
from rag.generation.context_units import context_units
from rag.generation.extractive import ExtractiveAnswerer
from rag.base.text import tokenize
texts = ["The default journal mode of the database engine is DELETE unless WAL is enabled by a pragma.",
         "A write transaction on the database locks the journal file until the engine commits the change.",
         "The pragma sets the busy timeout of the engine, in milliseconds, for a locked database file.",
         "Readers of the database never block writers in WAL mode, and the journal is checkpointed."]
units = context_units(texts)
key = tokenize("Which pragma changes the default journal mode of the database engine to WAL for locked files?")
in_unit, lexical, weights = ExtractiveAnswerer()._term_scores(key, units)
print([repr(float(x)) for x in (*in_unit, *lexical)])
"""


def test_term_scores_are_identical_under_every_hash_seed():
    outputs = set()
    for seed in range(6):
        env = {**os.environ, "PYTHONHASHSEED": str(seed)}
        run = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, check=True)
        outputs.add(run.stdout)
    assert len(outputs) == 1, outputs
