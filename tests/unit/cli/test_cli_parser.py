"""A run of `rag` builds the arguments of its own subcommand only; every help reads as when all are built.

`rag --help` lists every subcommand with its line; `rag <name> --help` (and `rag eval <name> --help`) is
the same text the parser of every subcommand prints; a mistake is reported the same way.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from rag import cli

HELPS = [["--help"], *([name, "--help"] for name in cli.COMMANDS), ["eval", "qa", "--help"],
         ["eval", "financebench", "--help"]]
MISTAKES = [[], ["bogus"], ["ask"], ["eval"], ["ask", "q", "--k", "x"], ["index", "--no-such-option"], ["--", "ask"]]


def _printed(parse: object, argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[object, str, str]:
    with pytest.raises(SystemExit) as stop:
        parse(argv)   # type: ignore[operator]
    out = capsys.readouterr()
    return stop.value.code, out.out, out.err


@pytest.mark.parametrize("argv", HELPS + MISTAKES, ids=lambda argv: " ".join(argv) or "(nothing)")
def test_a_run_prints_what_the_whole_parser_prints(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    whole = _printed(cli.build_parser().parse_args, argv, capsys)
    run = _printed(cli.main, argv, capsys)
    assert run == whole and whole[1] + whole[2]


def test_the_top_help_lists_every_subcommand_with_its_line(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = _printed(cli.main, ["--help"], capsys)
    for name, command in cli.COMMANDS.items():
        assert f"    {name} " in out and command.help.split()[0] in out


def test_rag_ask_builds_no_other_subcommands_arguments() -> None:
    code = ("import sys; from rag import cli; parser = cli.build_parser('ask'); "
            "print('rag.indexing.index_options' in sys.modules, parser.parse_args(['ask', 'q']).command, end=' '); "
            "parser.parse_args(['index', 'docs'])")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.stdout == "False ask " and proc.returncode == 2 and "unrecognized arguments: docs" in proc.stderr
