"""`rag ask`'s request, resolved and validated once at the command line's door (`rag.cli.request`).

The command runs on one typed `AskRequest` (the question, the chain's settings with the validated filter, the
store options); its mistakes are reported in the order the options are read: `--k`, `--max-tokens`, `--filter`,
`--backend`, then a missing store.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag import cli
from rag.base.validated_filter import Filter
from rag.cli.request import AskRequest, StoreRequest, add_ask, ask_request

BAD = {"--k": ("0", "--k must be a positive integer"),
       "--max-tokens": ("-3", "--max-tokens must be a positive integer"),
       "--filter": ('{"year": {"$near": 1}}', "unknown operator"),
       "--backend": ('{"kind": "mongo"}', "store: kind must be one of")}
GOOD = {"--k": "4", "--max-tokens": "500", "--filter": '{"year": {"$gte": 2020}}', "--backend": None}


def test_the_arguments_resolve_to_one_typed_request() -> None:
    import argparse

    parser = argparse.ArgumentParser()
    add_ask(parser)
    request = ask_request(parser.parse_args(["why?", "--k", "3", "--max-tokens", "900", "--filter", '{"year": 2024}',
                                             "--store", "kb", "--collection", "notes", "--search", "bm25", "--json"]))
    assert request == AskRequest(question="why?", store=StoreRequest("kb", "notes", "bm25", None),
                                 settings={"k": 3, "max_tokens": 900, "filter": {"year": {"$eq": 2024}}},
                                 filter_text='{"year": 2024}', json=True)
    assert type(request.settings["filter"]) is Filter   # validated: every stage takes it as it is
    with pytest.raises(TypeError):
        request.settings["k"] = 5   # type: ignore[index]
    bare = ask_request(parser.parse_args(["why?"]))
    assert dict(bare.settings) == {} and bare.filter_text is None and bare.store == StoreRequest(".rag", "docs")


def test_the_command_runs_on_the_request_resolved_at_the_door(monkeypatch, tmp_path: Path) -> None:
    seen: list = []
    resolved: list = []

    def resolve(args):
        resolved.append(args)
        return ask_request(args)

    command = cli.COMMANDS["ask"]
    monkeypatch.setitem(cli.COMMANDS, "ask", command._replace(run=lambda request: seen.append(request) or 0,
                                                              request=resolve))
    assert cli.main(["ask", "q", "--filter", '{"a": 1}', "--store", str(tmp_path)]) == 0
    assert len(resolved) == 1 and len(seen) == 1 and isinstance(seen[0], AskRequest)
    assert seen[0].settings["filter"] == {"a": {"$eq": 1}} and seen[0].store.store == str(tmp_path)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(bad=st.lists(st.sampled_from(sorted(BAD)), unique=True))
def test_mistakes_are_reported_in_the_order_the_options_are_read(bad: list[str], tmp_path: Path, capsys) -> None:
    argv = ["ask", "q", "--store", str(tmp_path / "nowhere")]
    for option in BAD:
        value = BAD[option][0] if option in bad else GOOD[option]
        if value is not None:
            argv += [option, value]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    first = next((option for option in BAD if option in bad), None)
    expected = BAD[first][1] if first else "no store at"
    assert err.startswith("rag ask: error: ") and expected in err and err.count("\n") == 1, (argv, err)


def test_the_store_options_of_other_commands_are_resolved_the_same_way(tmp_path: Path) -> None:
    import argparse

    from rag.base.errors import ConfigError
    from rag.cli.request import store_args
    from rag.cli.store import store_rag

    parser = argparse.ArgumentParser()
    store_args(parser)
    args = parser.parse_args(["--store", str(tmp_path), "--backend", json.dumps({"kind": "mongo"})])
    with pytest.raises(ConfigError, match="store: kind must be one of"):
        store_rag(args)   # a Namespace (rag eval qa, rag serve --store) resolves its StoreRequest there
