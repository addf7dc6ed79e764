"""Helpers of the source tests: a counting fake embedder and an in-memory source."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
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


def chunk_sources(kb: KnowledgeBase) -> list[str]:
    """The `source` of every chunk, sorted (a duplicate shows up twice)."""
    return sorted(d.metadata["source"] for d in kb.get_documents())


Route = tuple[int, dict[str, str], bytes] | Callable[[BaseHTTPRequestHandler], None]


class Site:
    """A local web site: routes by path, and the paths requested."""

    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.requests: list[str] = []
        site = self

        class Handler(BaseHTTPRequestHandler):
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
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

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
