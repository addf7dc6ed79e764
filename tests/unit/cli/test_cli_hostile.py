"""`rag ask --filter` with hostile filters: the usual one-line error and exit code 2, never a traceback."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings

from rag import cli
from rag.base.filters import MAX_FILTER_DEPTH
from tests.unit.hostile import hostile_filters, nested


def _one_line_error(capsys, argv: list[str]) -> str:
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rag ask: error: ") and "Traceback" not in captured.err
    assert len(lines[0]) < 2100
    return lines[0]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flt=hostile_filters)
def test_hostile_filters_print_one_line_errors(tmp_path, capsys, flt):
    text = json.dumps(flt, allow_nan=True)
    _one_line_error(capsys, ["ask", "q", "--store", str(tmp_path / "s"), "--filter", text])


@pytest.mark.parametrize("text", [
    '{"year": NaN}', '{"year": {"$gt": -Infinity}}', '{"t": {"$in": [1, "a"]}}', '{"t": "\\ud800"}',
    json.dumps(nested(MAX_FILTER_DEPTH + 1)), "[" * 100_000 + "]" * 100_000, '{"a": ' * 50_000 + "1" + "}" * 50_000,
    '{"t": "' + "x" * 1_000_000,
])
def test_the_reported_filters_print_one_line_errors(tmp_path, capsys, text):
    _one_line_error(capsys, ["ask", "q", "--store", str(tmp_path / "s"), "--filter", text])
