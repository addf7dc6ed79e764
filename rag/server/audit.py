"""One audit line per answered request: who asked, on which route, which documents came back (never text).

The line goes to the standard `logging` logger `rag.audit` at INFO; when traces are on, the request's
root span carries the same fields (`rag.principal` and `rag.route` from the run's metadata,
`trace_metadata`; `rag.document_ids` and `rag.documents` from its context, `rag.base.tracing`).
Values are JSON-quoted, so no principal id or document id can forge a line.

```
audit principal="ann" route="/invoke" documents=["3f2a...", "9c1e..."]
```

Example:
    >>> from langchain_core.documents import Document
    >>> document_ids([Document(page_content="secret", metadata={"doc_id": "d1"}),
    ...               Document(page_content="x", metadata={"source": "b.md"}), Document(page_content="y",
    ...               metadata={"doc_id": "d1"})])
    ['d1', 'b.md']
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langchain_core.documents import Document

from rag.base.acl import Principal

__all__ = ["audit", "audit_sources", "document_ids", "trace_metadata"]

logger = logging.getLogger("rag.audit")
#: The most document ids one line lists (a context has at most `max_k` chunks per resource).
MAX_IDS = 200


def document_ids(documents: Iterable[Document | Mapping[str, Any]]) -> list[str]:
    """The distinct document ids (`doc_id`, else `source`) of chunks or source entries, in order."""
    seen: dict[str, None] = {}
    for doc in documents:
        md = doc.metadata if isinstance(doc, Document) else (doc.get("metadata") or {})
        value = md.get("doc_id") or md.get("source") or (None if isinstance(doc, Document) else doc.get("source"))
        if value is not None:
            seen.setdefault(str(value), None)
    return list(seen)[:MAX_IDS]


def audit(principal: Principal | None, route: str, documents: Sequence[Document | Mapping[str, Any]],
          config: Any = None) -> None:
    """Write the audit line of one request (`config`: its run config, unused; the trace has its own)."""
    ids = document_ids(documents)
    who = principal.id if principal is not None else None
    logger.info("audit principal=%s route=%s documents=%s", json.dumps(who), json.dumps(route),
                json.dumps(ids, ensure_ascii=True))


def audit_sources(principal: Principal | None, route: str, sources: Sequence[Mapping[str, Any]],
                  config: Any = None) -> None:
    """`audit` of a response's source entries (`/invoke`, `/stream`, chat completions)."""
    audit(principal, route, sources, config)


def trace_metadata(principal: Principal | None, route: str) -> dict[str, str]:
    """A request's run metadata: its root span records the principal and the route (`rag.base.tracing`)."""
    return {"rag.principal": principal.id if principal is not None else "", "rag.route": route}
