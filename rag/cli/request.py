"""What a command line asks for, as one typed request resolved and validated once: `rag ask`'s arguments and
the store options every command that opens a knowledge base takes.

Each option is declared here beside what it resolves to. `rag ask`'s arguments (`add_ask`) resolve, once,
at the command line's door (`rag.cli.main`, before the command runs), into an `AskRequest`: the question,
the chain's per-request settings (`k`, `max_tokens` and the filter, validated: the chain's input step
takes the validated filter as it is) and a `StoreRequest` (`--store`, `--collection`, `--search` and the
`--backend` block, validated). The command then opens the store and builds the chain once from it
(`rag.cli.store.store_rag`). The mistakes are reported in the order the options are read: `--k`,
`--max-tokens`, `--filter` (JSON, then the filter itself), `--backend`, and only then a missing store.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser()
    >>> add_ask(parser)
    >>> request = ask_request(parser.parse_args(["why?", "--k", "3", "--filter", '{"year": 2024}']))
    >>> request.question, request.settings["k"], request.settings["filter"], request.store.collection
    ('why?', 3, {'year': {'$eq': 2024}}, 'docs')
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from rag.base.errors import ConfigError, FilterError, short_repr
from rag.base.filters import MAX_FILTER_DEPTH, validate_filter

__all__ = ["DEFAULT_COLLECTION", "DEFAULT_STORE", "AskRequest", "StoreRequest", "add_ask", "ask_request",
           "backend_opener", "store_args"]

DEFAULT_STORE = ".rag"


DEFAULT_COLLECTION = "docs"


def store_args(parser: argparse.ArgumentParser) -> None:
    """`--collection`, `--store` and `--backend`: where a command's knowledge base is (`StoreRequest`)."""
    parser.add_argument("--collection", default=DEFAULT_COLLECTION, help="collection name (default: %(default)s)")
    parser.add_argument("--store", default=DEFAULT_STORE, help="store directory (default: %(default)s)")
    parser.add_argument("--backend", default=None, metavar="JSON",
                        help='keep the chunks in another store: its config block as JSON, e.g. '
                             '\'{"kind": "pgvector", "url_env": "RAG_PG_URL"}\' (docs/stores.md); on pgvector, Qdrant '
                             'and Milvus the manifest and records live in that engine too and --store is a local '
                             'cache; on the others they stay in --store (default: Chroma in --store)')


def add_ask(p: argparse.ArgumentParser) -> None:
    """`rag ask`'s arguments (`ask_request` resolves them)."""
    p.add_argument("question")
    p.add_argument("--search", default="hybrid", choices=("hybrid", "dense", "bm25"),
                   help="how a knowledge base is searched (default: %(default)s: dense + BM25 fused)")
    p.add_argument("--k", type=int, default=None,
                   help="at most this many chunks in the context (default: as many as the token budget holds)")
    p.add_argument("--max-tokens", type=int, default=None,
                   help="the context budget in tokens (default: the recommended pipeline's 4000)")
    p.add_argument("--filter", default=None, help='metadata filter as JSON, e.g. \'{"page": {"$lt": 3}}\'')
    p.add_argument("--json", action="store_true", help="print the whole output as JSON")
    store_args(p)


def backend_opener(args: Any, *, create: bool) -> Callable[[Any], Any] | None:
    """The `--backend` block, validated now, as a function opening that store with an embedding model.

    `create`: make the table or collection when it is missing (indexing); asking never creates.
    """
    if not args.backend:
        return None
    from rag.config.knowledge_base import store_config
    from rag.config.yaml_file import load_yaml_text

    # the config's own strict parser (JSON is YAML): a key written twice, deep nesting, aliases refused
    spec = load_yaml_text(args.backend, source="--backend")
    if not isinstance(spec, dict):
        raise ConfigError(f"--backend must be a JSON object such as {{\"kind\": \"pgvector\", \"url_env\": "
                          f"\"RAG_PG_URL\"}}; got {short_repr(args.backend)}")
    return store_config({**spec, "create": create}, args.collection).open


@dataclass(frozen=True)
class StoreRequest:
    """Where a command's knowledge base is, validated: the store directory, the collection, how it is searched,
    and the `--backend` store's opener (None: Chroma in the directory)."""

    store: str
    collection: str
    search: str = "hybrid"
    backend: Callable[[Any], Any] | None = None

    @classmethod
    def from_args(cls, args: Any, *, create: bool = False) -> StoreRequest:
        """The store options of parsed arguments (`--backend` validated; `create`: indexing makes its store)."""
        return cls(args.store, args.collection, getattr(args, "search", "hybrid"), backend_opener(args, create=create))


@dataclass(frozen=True)
class AskRequest:
    """`rag ask`'s request, resolved and validated once.

    Attributes:
        question: the question.
        settings: the chain's per-request settings (`config={"configurable": settings}`): `k`, `max_tokens`
            and `filter` (a validated `rag.base.filters.Filter`), each only when given.
        store: where the knowledge base is.
        filter_text: `--filter` as given (None: no filter), for messages.
        json: print the whole output as JSON.
    """

    question: str
    store: StoreRequest
    settings: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    filter_text: str | None = None
    json: bool = False


def ask_request(args: argparse.Namespace) -> AskRequest:
    """`rag ask`'s parsed arguments as its `AskRequest`; the first mistake is a `ConfigError` / `FilterError`."""
    settings: dict[str, Any] = {}
    for key, flag, value in (("k", "--k", args.k), ("max_tokens", "--max-tokens", args.max_tokens)):
        if value is not None and value < 1:
            raise ConfigError(f"{flag} must be a positive integer, got {value}")
        if value is not None:
            settings[key] = value
    if args.filter:
        settings["filter"] = _filter(args.filter)   # reported before the store is opened
    return AskRequest(question=args.question, store=StoreRequest.from_args(args), settings=MappingProxyType(settings),
                      filter_text=args.filter or None, json=args.json)


def _filter(text: str) -> Any:
    """`--filter`'s JSON, validated (`validate_filter`: the canonical `Filter` every stage takes as it is)."""
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"--filter is not valid JSON ({exc.msg} at column {exc.colno}): {short_repr(text)}") from None
    except RecursionError:
        raise FilterError(f"--filter nests too deeply; the limit is {MAX_FILTER_DEPTH} levels") from None
    return validate_filter(parsed)
