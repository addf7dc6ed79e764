"""Every code block of README.md and docs/*.md runs as a test (Sybil).

Each page runs top to bottom in its own temporary directory (the *sandbox*), which holds copies
of `docs/` and `configs/` and a `reports/` folder of three small PDF filings (those of
`rag.testing.financebench.SYNTHETIC_FILINGS`). Stores (`.rag`, ...) are built there, never in the
checkout or in `~` (`HOME` points into the sandbox). The blocks of a page share one Python
namespace, like a notebook. `pytest README.md docs` runs only these tests; the run ends with a
line counting the blocks that ran and were skipped, and the CPU-seconds they took.

- ```` ```python ```` blocks are executed; blocks starting with `>>>` are doctests, whose output
  is compared (doctest's ELLIPSIS and NORMALIZE_WHITESPACE: `...` stands for any text).
- ```` ```bash ```` blocks are run by `bash -e` in the sandbox, where `rag` is
  `python -m rag.cli` of this checkout; they must exit 0. `rag serve` and `chroma run` start in
  the background and the block goes on once the server answers; every server is stopped at the
  end of the page. Ports the docs name (8000, 8001, 8080) are replaced by free ports.
- ```` ```console ```` blocks are `$ command` lines, each followed by the output it must print
  (stdout and stderr together; compared like a doctest, a line holding only `...` stands for any
  number of lines, the sandbox path reads as `.`). The exit status is not checked: the output is.
- Any other block (json, yaml, text, or no language) is shown, not run.
- `<!-- skip: next "reason" -->` skips the next block and reports the reason (pytest counts it as
  skipped); `<!-- skip: next if(not os.environ.get("OPENAI_API_KEY"), reason="...") -->` skips
  only when the condition holds. A skip without a reason is an error. Use skips only for what the
  test machine lacks (a key, a remote server) or for commands that install or re-run the suite.
- `<!-- invisible-code-block: python ... -->` runs setup code the reader does not need to see.
"""

from __future__ import annotations

import doctest
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from rag.testing.financebench import SYNTHETIC_FILINGS, write_pdf

try:
    from sybil import Document, Example, Sybil
    from sybil.parsers.markdown import (
        CodeBlockParser,
        PythonCodeBlockParser,
        SkipParser,
    )
except ImportError:  # the dev extra is not installed: only the code tests run
    Sybil = None

ROOT = Path(__file__).parent
DOC_PORTS = ("8000", "8001", "8080")
OPTIONFLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
SKIP_WITHOUT_REASON = re.compile(r"<!--\s*skip:\s*(next|start)\s*-->")
_SANDBOX_ENV = ("RAG_LLM", "RAG_EMBEDDING", "RAG_EMBEDDING_PRECISION", "RAG_API_TOKEN", "OPENAI_API_KEY",
                "OPENAI_BASE_URL", "RAG_LLM_URL", "RAG_LLM_MODEL", "RAG_LLM_CONTEXT", "OLLAMA_HOST")

# The shell prelude: `rag` is this checkout's CLI; servers go to the background until they answer.
_PRELUDE = r"""
rag() {
  if [ "$1" = serve ]; then
    case " $* " in *" --port "*) ;; *) set -- "$@" --port "$RAG_DOCS_PORT_8000" ;; esac
    _rag_docs_background "$RAG_DOCS_PYTHON" -m rag.cli "$@"
  else
    "$RAG_DOCS_PYTHON" -m rag.cli "$@"
  fi
}
chroma() {
  if [ "$1" = run ]; then _rag_docs_background "$RAG_DOCS_BIN/chroma" "$@"; else "$RAG_DOCS_BIN/chroma" "$@"; fi
}
_rag_docs_background() {
  local port="" prev="" arg pid
  for arg in "$@"; do [ "$prev" = --port ] && port=$arg; prev=$arg; done
  # a server the page started before on the same port makes room (the docs restart servers)
  while read -r pid prev; do [ "$prev" = "$port" ] && kill "$pid" 2>/dev/null && while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
  done < <(cat "$RAG_DOCS_SANDBOX/server.pids" 2>/dev/null)
  "$@" >>"$RAG_DOCS_SANDBOX/server.log" 2>&1 &
  pid=$!
  echo "$pid $port" >>"$RAG_DOCS_SANDBOX/server.pids"
  for _ in $(seq 600); do
    curl -s -o /dev/null "http://127.0.0.1:$port/" && return 0
    kill -0 "$pid" 2>/dev/null || { cat "$RAG_DOCS_SANDBOX/server.log" >&2; return 1; }
    sleep 0.5
  done
  echo "server on port $port did not answer" >&2; return 1
}
"""


def _free_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return str(sock.getsockname()[1])


def _remap_ports(text: str, ports: dict[str, str]) -> str:
    for port, free in ports.items():
        text = re.sub(rf"(?<=[:\s]){port}\b", free, text)
    return text


def _setup(namespace: dict[str, Any]) -> None:
    """Make the page's sandbox and enter it."""
    sandbox = Path(tempfile.mkdtemp(prefix="rag-docs-"))
    ports = {port: _free_port() for port in DOC_PORTS}
    shutil.copytree(ROOT / "docs", sandbox / "docs")
    shutil.copytree(ROOT / "configs", sandbox / "configs")
    for config in (sandbox / "configs").glob("*.yaml"):
        config.write_text(_remap_ports(config.read_text(), ports))
    (sandbox / "bench").symlink_to(ROOT / "bench")     # read by the benchmark commands
    (sandbox / "reports").mkdir()
    for name, (_company, _year, pages) in SYNTHETIC_FILINGS.items():
        write_pdf(sandbox / "reports" / f"{name}.pdf", pages)
    (sandbox / "home").mkdir()
    saved = {name: os.environ.get(name) for name in (*_SANDBOX_ENV, "HOME", "PYTHONPATH")}
    for name in _SANDBOX_ENV:
        os.environ.pop(name, None)
    os.environ["HOME"] = str(sandbox / "home")
    os.environ["OLLAMA_HOST"] = "127.0.0.1:9"   # RAG_LLM=auto: a developer's Ollama must not answer the docs
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), saved["PYTHONPATH"]) if p)
    namespace.update(os=os, _docs={"sandbox": sandbox, "cwd": os.getcwd(), "env": saved, "ports": ports,
                                   "groups": []})
    os.chdir(sandbox)


def _teardown(namespace: dict[str, Any]) -> None:
    """Stop what the page's shell blocks left running, leave and delete its sandbox, restore the environment."""
    state = namespace["_docs"]
    for group in state["groups"]:
        for pid in _page_processes(group, state["sandbox"]):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    os.chdir(state["cwd"])
    for name, value in state["env"].items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    shutil.rmtree(state["sandbox"], ignore_errors=True)


def _page_processes(group: int, sandbox: Path) -> list[int]:
    """The processes of `group` that this page started (they carry its sandbox in their environment).

    A group whose processes have all ended frees its number, and the system gives it to another process:
    by the page's end it may name a server another test started (a PostgreSQL postmaster leads a group of
    its own), which a kill of the whole group stopped under `make test`'s two workers.
    """
    marker = f"RAG_DOCS_SANDBOX={sandbox}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == group and marker in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                found.append(int(entry))
        except (OSError, ValueError, IndexError):   # ended meanwhile, or not ours to read
            continue
    return found


def _run_shell(script: str, state: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """Run a shell script in the sandbox with the `rag` prelude; documented ports are remapped.

    The script runs in a process group of its own, which the page's teardown stops: servers and
    `&` jobs it leaves behind live until the end of the page.
    """
    bin_dir = str(Path(sys.executable).parent)
    env = dict(os.environ, RAG_DOCS_PYTHON=sys.executable, RAG_DOCS_BIN=bin_dir, RAG_DOCS_SANDBOX=str(state["sandbox"]),
               PATH=os.pathsep.join((bin_dir, os.environ.get("PATH", ""))),
               **{f"RAG_DOCS_PORT_{port}": free for port, free in state["ports"].items()})
    out, err = state["sandbox"] / "block.out", state["sandbox"] / "block.err"
    with out.open("w") as stdout, err.open("w") as stderr:  # files, not pipes: `&` jobs may outlive the block
        process = subprocess.Popen(["bash", "-e", "-c", _PRELUDE + _remap_ports(script, state["ports"])],
                                   cwd=state["sandbox"], env=env, stdout=stdout, stderr=stderr, text=True,
                                   start_new_session=True)
        state["groups"].append(process.pid)
        process.wait(timeout=600)
    stdout, stderr = out.read_text(), err.read_text()
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def _evaluate_bash(example: Example) -> str | None:
    result = _run_shell(example.parsed, example.namespace["_docs"])
    if result.returncode != 0:
        return f"exit status {result.returncode}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
    return None


def _evaluate_console(example: Example) -> str | None:
    """`$ command` lines, each followed by its expected output."""
    state = example.namespace["_docs"]
    checker = doctest.OutputChecker()
    for command, expected in re.findall(r"^\$ ((?:.*\\\n)*.*)\n((?:(?!\$ ).*\n?)*)", example.parsed, re.MULTILINE):
        expected = re.sub(r"\n[ \t]*\.\.\.[ \t]*\n", "...", expected)   # a line of `...`: any lines
        result = _run_shell(command, state)
        got = (result.stdout + result.stderr).replace(str(state["sandbox"]), ".")
        if not checker.check_output(expected, got, OPTIONFLAGS):
            return f"$ {command}\n--- expected\n{expected}--- got (exit status {result.returncode})\n{got}"
    return None


def _skips_have_reasons(document: Document) -> list[Any]:
    """A parser that finds no examples: it refuses a page with a skip that gives no reason."""
    match = SKIP_WITHOUT_REASON.search(document.text)
    if match:
        raise ValueError(f"{document.path}: {match.group(0)} needs a reason, e.g. <!-- skip: next \"needs a key\" -->")
    return []


if Sybil is not None:
    _sybil = Sybil(
        parsers=[
            PythonCodeBlockParser(doctest_optionflags=OPTIONFLAGS),
            CodeBlockParser("bash", _evaluate_bash),
            CodeBlockParser("console", _evaluate_console),
            SkipParser(),
            _skips_have_reasons,
        ],
        patterns=["README.md", "docs/*.md"],
        setup=_setup,
        teardown=_teardown,
    )
    pytest_collect_file = _sybil.pytest()


def _block_kind(item: pytest.Item) -> str | None:
    """'block' for a code block of the docs, 'setup' for an invisible one, None for anything else."""
    example = getattr(item, "example", None)
    if type(item).__name__ != "SybilItem" or example is None or type(example.region.evaluator).__name__ == "Skipper":
        return None
    return "setup" if "directive" in example.region.lexemes else "block"


_TALLY: dict[str, float] = {}
_CPU: dict[str, float] = {}


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """conftest.py files hold fixtures, not doctests. Under --doctest-modules, naming two test folders on
    the command line made pytest import both conftest.py files as the doctest module "conftest" and stop
    on the clash; they are still loaded as conftests."""
    return True if collection_path.name == "conftest.py" else None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Docs blocks use the real model and real stores: they are integration tests."""
    for item in items:
        if type(item).__name__ == "SybilItem":
            item.add_marker(pytest.mark.integration)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Count the docs' code blocks by outcome (skip directives are not blocks), and their CPU seconds. Read from
    the report's user properties, which pytest-xdist carries from its workers to the process that prints."""
    props = dict(report.user_properties)
    kind = props.get("docs_block")
    if kind and (report.when == "call" or report.skipped):
        key = f"{kind} {report.outcome}"
        _TALLY[key] = _TALLY.get(key, 0) + 1
    if "docs_cpu" in props and report.when == "call":
        _CPU[report.nodeid] = float(props["docs_cpu"])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """CPU seconds of the docs' blocks (this process and the commands they ran), load-independent."""
    before = os.times()
    yield
    if _block_kind(item):
        after = os.times()
        item.user_properties.append(("docs_cpu", sum(after[i] - before[i] for i in range(4))))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    outcome = yield
    kind = _block_kind(item)
    if kind and ("docs_block", kind) not in item.user_properties:
        item.user_properties.append(("docs_block", kind))
        outcome.get_result().user_properties.append(("docs_block", kind))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Say how many docs code blocks ran and how many were skipped, with the reasons in -rs."""
    if _TALLY:
        blocks = ", ".join(f"{n:.0f} {key}" for key, n in sorted(_TALLY.items()))
        terminalreporter.write_line(f"docs code examples (README.md, docs/*.md; a doctest counts per >>>): {blocks}; "
                                    f"{sum(_CPU.values()):.0f} CPU-seconds, the most in "
                                    + ", ".join(f"{k} ({v:.0f} s)" for k, v in sorted(_CPU.items(), key=lambda kv: -kv[1])[:5]))
