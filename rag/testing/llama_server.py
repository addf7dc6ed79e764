"""Run llama-cpp-python's OpenAI-compatible server (`python -m llama_cpp.server`) on loopback, for tests.

Example:
    >>> with llama_server(smollm2_path(), n_ctx=2048, log=Path("server.log")) as url:   # doctest: +SKIP
    ...     openai_chat_model(base_url=url).invoke("Hi")
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from rag.testing.chroma_server import HOST, free_port

__all__ = ["llama_server"]


@contextlib.contextmanager
def llama_server(model: Path, *, n_ctx: int, log: Path, timeout: float = 120.0) -> Iterator[str]:
    """Serve the GGUF `model` with an `n_ctx`-token window until the block ends; yields the `/v1` base URL.

    The server's output goes to `log` (quoted when it dies before answering); a server still busy with a long
    prompt when the block ends is killed after 30 seconds.
    """
    port = free_port()
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", HOST,
                                 "--port", str(port), "--n_ctx", str(n_ctx)], stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"})
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"http://{HOST}:{port}/v1/models", timeout=2):
                    break
            except OSError as exc:
                if proc.poll() is not None:
                    raise RuntimeError(f"llama_cpp.server exited: {log.read_text(errors='replace')[-2000:]}") from exc
                if time.monotonic() > deadline:
                    raise RuntimeError(f"llama_cpp.server did not answer within {timeout:.0f} s") from exc
                time.sleep(0.5)
        yield f"http://{HOST}:{port}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:   # still evaluating a long prompt
            proc.kill()
            proc.wait(timeout=30)
