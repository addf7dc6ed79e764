"""Helpers of the source tests: a counting fake embedder and an in-memory source."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterator
from typing import Any
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings

from rag.compose.knowledge_base import KnowledgeBase
from rag.sources.base import Access, Fetched, Source, SourceError, SourceItem, write_temporary


class CountingEmbedding(Embeddings):
    """DeterministicFakeEmbedding that counts the texts it embeds (a real fake, not a mock)."""

    def __init__(self, size: int = 16) -> None:
        self.inner = DeterministicFakeEmbedding(size=size)
        self.texts: list[str] = []
        self._lock = threading.Lock()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        with self._lock:
            self.texts += texts
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)


class DictSource(Source):
    """Items held in a dict (id suffix -> text): versions are the texts; `fetched` counts fetches.

    Items whose text starts with "FILE:" are fetched as markdown files (the file path of the write path);
    others as Documents. `errors` maps item suffixes to an error raised by `fetch`.
    """

    def __init__(self, texts: dict[str, str], *, prefix: str = "mem://box/",
                 access: dict[str, Access] | None = None) -> None:
        self.texts, self.prefix = texts, prefix
        self.access = access or {}
        self.fetched: list[str] = []
        self.errors: dict[str, str] = {}
        self.bad_keys: dict[str, str] = {}

    def items(self) -> Iterator[SourceItem]:
        for key, text in sorted(self.texts.items()):
            name = f"{key}.md" if text.startswith("FILE:") else ""
            yield SourceItem(self.prefix + key, version=text, name=name, access=self.access.get(key))
        for key, why in self.bad_keys.items():
            yield SourceItem(self.prefix + key, error=why)

    def fetch(self, item: SourceItem) -> Fetched:
        key = item.id.removeprefix(self.prefix)
        self.fetched.append(key)
        if key in self.errors:
            raise SourceError(f"{item.id}: {self.errors[key]}")
        text = self.texts[key]
        if text.startswith("FILE:"):
            return write_temporary(item.name, text.removeprefix("FILE:").encode())
        return Fetched(documents=[Document(page_content=text, metadata={"kind": "note"})])


class CountsReads:
    """Mixed into a `Source` class (first): records the item ids (without the source's prefix) it fetches."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.read: list[str] = []

    def fetch(self, item: Any) -> Any:
        self.read.append(item.id.removeprefix(self.prefix))
        return super().fetch(item)


def chunk_sources(kb: KnowledgeBase) -> list[str]:
    """The `source` of every chunk, sorted (a duplicate shows up twice)."""
    return sorted(d.metadata["source"] for d in kb.get_documents())


Route = tuple[int, dict[str, str], bytes] | Callable[[BaseHTTPRequestHandler], None]


class Site:
    """A local web site: routes by path, and the paths requested.

    With `validators` (True, or "etag" / "modified" for one of them), every page of a route tuple is sent
    with an `ETag` (a hash of its body) and a `Last-Modified`, and a request whose `If-None-Match` /
    `If-Modified-Since` still holds gets a 304 without a body; `bodies` lists the paths whose bodies
    were sent. With `keep_alive`, it speaks
    HTTP/1.1 and keeps connections open; `connections` counts the connections it accepted.
    """

    def __init__(self, *, validators: bool | str = False, keep_alive: bool = False) -> None:
        self.routes: dict[str, Route] = {}
        self.requests: list[str] = []
        self.bodies: list[str] = []
        self.conditional: list[str] = []   # paths asked with a validator
        self.connections = 0
        self.modified = "Wed, 01 Jan 2025 00:00:00 GMT"
        self.routes_modified: dict[str, str] = {}   # path -> its own Last-Modified (else `modified`)
        site = self

        class Handler(BaseHTTPRequestHandler):
            def setup(self) -> None:
                site.connections += 1
                super().setup()

            def do_GET(self) -> None:  # noqa: N802 - the http.server API
                site.requests.append(self.path)
                route = site.routes.get(self.path)
                if route is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if callable(route):
                    route(self)
                    return
                status, headers, body = route
                if validators and status == 200:
                    etag = '"' + hashlib.sha256(body).hexdigest()[:16] + '"'
                    modified = site.routes_modified.get(self.path, site.modified)
                    asked = self.headers.get("If-None-Match"), self.headers.get("If-Modified-Since")
                    if any(asked):
                        site.conditional.append(self.path)
                    sent = {k: v for k, v in (("ETag", etag), ("Last-Modified", modified))
                            if validators is True or k == {"etag": "ETag", "modified": "Last-Modified"}[validators]}
                    if (asked[0] is not None and asked[0] == sent.get("ETag")) or \
                            (asked[0] is None and asked[1] is not None and asked[1] == sent.get("Last-Modified")):
                        self.send_response(304)
                        for key, value in sent.items():
                            self.send_header(key, value)
                        self.end_headers()
                        return
                    headers = {**headers, **sent}
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                # recorded before the write: once the client has the last body it may finish and check `bodies`
                # before this thread would run again (CI saw the last page of a crawl missing)
                site.bodies.append(self.path)
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        if keep_alive:
            Handler.protocol_version = "HTTP/1.1"
            # headers and body go out in two writes: without TCP_NODELAY a kept-alive connection waits for the
            # client's delayed ACK (~40 ms) before the body, as real servers avoid with TCP_NODELAY
            Handler.disable_nagle_algorithm = True
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def page(self, path: str, title: str, body: str, links: list[str] = ()) -> None:
        anchors = "".join(f'<a href="{link}">{link}</a> ' for link in links)
        html = f"<html><head><title>{title}</title></head><body><h1>{title}</h1><p>{body}</p>{anchors}</body></html>"
        self.routes[path] = (200, {"Content-Type": "text/html; charset=utf-8"}, html.encode())

    def sitemap(self, path: str, pages: dict[str, str]) -> None:
        urls = "".join(f"<url><loc>{self.base}{p}</loc><lastmod>{m}</lastmod></url>" for p, m in pages.items())
        xml = f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'
        self.routes[path] = (200, {"Content-Type": "application/xml"}, xml.encode())

    def pages_requested(self) -> list[str]:
        return [p for p in self.requests if p.startswith("/p")]
