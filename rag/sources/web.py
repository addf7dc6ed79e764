"""`WebSource`: a web site, from its sitemap (pages with `lastmod`) or by a bounded same-host crawl.

- Sitemap (a URL ending in `.xml` or `.xml.gz`, or `sitemap=True`): every page the sitemap (and the
  sitemaps an index names, each read once) lists on the same host; a page's version is its
  `lastmod`, so a re-sync fetches only the pages whose `lastmod` changed. Pages without a `lastmod`
  are fetched while listing and versioned by a hash of their bytes.
- Crawl (any other URL): the start page, then the links found on each HTML page, breadth first,
  same host only, at most `max_pages` pages; a page's version is a hash of its bytes; a page
  answering 404 or 410 is gone (deleted), one that fails otherwise keeps its indexed copy.

A page fetched while listing (a crawl, a sitemap page without `lastmod`) keeps its server's `ETag`
and `Last-Modified` with its record (`SourceItem.state`, with its links); the next sync asks with
`If-None-Match` / `If-Modified-Since`, and a 304 answer means unchanged: no body is read, the page
keeps its version and its links are followed as they were. A server that sends neither is fetched
and hashed again. One sync's requests share kept-alive connections (`HttpGuard`).

Both honour robots.txt (a disallowed page is not fetched) and go through `HttpGuard`: loopback and
private addresses refused unless `allow_private=True` (redirects checked too), at most `max_bytes`
per response, `timeout` seconds per response and `max_seconds` for the whole listing. A page that
cannot be taken is skipped with the reason (its earlier version stays); a listing cut by
`max_seconds` or a sitemap that cannot be read deletes nothing.

Example:
    >>> site = WebSource("https://docs.example.org/sitemap.xml")
    >>> site.mode, site.prefix
    ('sitemap', 'https://docs.example.org/')
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import time
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urljoin, urlsplit

from lxml import html

from rag.base.errors import ConfigError
from rag.sources.base import (
    Fetched,
    IncompleteListing,
    Source,
    SourceError,
    SourceItem,
    access_map_from,
    local_name,
    write_temporary,
)
from rag.sources.http import HttpGuard, Response, normalize_url
from rag.sources.sitemap import Robots, parse_sitemap

__all__ = ["WebSource"]

_SUFFIXES = {"text/html": ".html", "application/xhtml+xml": ".html", "text/plain": ".txt", "text/markdown": ".md",
             "application/pdf": ".pdf"}
_GONE = (404, 410)
_PAGE_SUFFIXES = (".html", ".htm", ".txt", ".md", ".pdf", ".rst")


class WebSource(Source):
    """A web site (see the module docstring).

    Args:
        url: a sitemap (`https://site/sitemap.xml`) or a start page.
        sitemap: True / False to say which; None: a URL ending in .xml or .xml.gz is a sitemap.
        allow_private: True allows loopback and private addresses (a local server, an intranet); a list of
            networks ("127.0.0.1/32") allows those only.
        max_pages: pages listed at most; max_sitemaps: sitemaps read at most (an index naming itself, or
            naming sitemaps without end, stops there).
        max_bytes: bytes per response; timeout: seconds per response; max_seconds: seconds for the listing.
        access: glob over page URLs -> `{users, groups, public}` (who may read them).
    """

    def __init__(self, url: str, *, sitemap: bool | None = None, allow_private: bool | Sequence[str] = False, max_pages: int = 1000,
                 max_sitemaps: int = 50, max_bytes: int = 10 * 1024 * 1024, timeout: float = 20.0,
                 max_seconds: float = 600.0, access: Mapping[str, Any] | None = None) -> None:
        parts = urlsplit(str(url))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"WebSource needs an http(s) URL with a host, got {str(url)[:120]!r}")
        for label, value in (("max_pages", max_pages), ("max_sitemaps", max_sitemaps), ("max_bytes", max_bytes)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{label} must be a positive integer, got {value!r}")
        self.url = normalize_url(str(url))
        self.mode = "sitemap" if (sitemap if sitemap is not None else
                                  parts.path.lower().endswith((".xml", ".xml.gz"))) else "crawl"
        self.host = parts.hostname.lower()
        self.prefix = f"{parts.scheme.lower()}://{parts.netloc.lower()}/"
        self.guard = HttpGuard(allow_private=allow_private, max_bytes=max_bytes, timeout=timeout, same_host=True)
        self.max_pages, self.max_sitemaps, self.max_seconds = max_pages, max_sitemaps, float(max_seconds)
        self.access_map = access_map_from(access)
        self._cache: Path | None = None   # pages fetched while listing (crawl, pages without lastmod)
        self._robots: Robots | None = None
        self._previous: dict[str, dict[str, Any]] = {}   # url -> what the last sync kept (validators, links)

    def previous(self, states: Mapping[str, str]) -> None:
        """What the last sync kept for each page fetched while listing (see the module docstring)."""
        self._previous = {}
        for url, text in states.items():
            try:
                state = json.loads(text)
            except (ValueError, RecursionError):   # (RecursionError: nested too deep to parse)
                continue   # (not one of ours: fetched and hashed again)
            if isinstance(state, dict) and isinstance(state.get("version"), str) and \
                    isinstance(state.get("links", []), list) and (state.get("etag") or state.get("modified")):
                self._previous[url] = state

    def __repr__(self) -> str:
        return f"WebSource({self.url!r}, mode={self.mode!r})"

    # ------------------------------------------------------------------ listing
    def items(self) -> Iterator[SourceItem]:
        """The site's pages (see the module docstring)."""
        deadline = time.monotonic() + self.max_seconds
        try:
            self._robots = self._read_robots(deadline)
            yield from (self._sitemap_items(deadline) if self.mode == "sitemap" else self._crawl(deadline))
        finally:
            self.guard.close()   # (one sync's kept-alive connections)

    def _read_robots(self, deadline: float) -> Robots:
        try:
            response = self.guard.get(self.prefix + "robots.txt", deadline=deadline)
        except SourceError:
            return Robots(None)   # no robots.txt that can be read: nothing is disallowed
        text = response.body.decode("utf-8", "replace") if response.status == 200 else None
        return Robots(text)

    def _sitemap_items(self, deadline: float) -> Iterator[SourceItem]:
        queue, read, listed = deque([self.url]), set(), 0
        while queue:
            url = queue.popleft()
            if url in read:
                continue   # a sitemap naming itself, or named twice
            if len(read) >= self.max_sitemaps:
                raise IncompleteListing(f"{self.url}: more than max_sitemaps={self.max_sitemaps} sitemaps")
            self._check_time(deadline)
            read.add(url)
            try:
                response = self._ok(self.guard.get(url, deadline=deadline))
                found = parse_sitemap(response.body, max_bytes=self.guard.max_bytes)
            except SourceError as exc:
                raise IncompleteListing(f"sitemap {exc}" if str(exc).startswith(url) else
                                        f"sitemap {url}: {exc}") from exc
            queue.extend(normalize_url(u) for u in found.sitemaps if self._same_host(u))
            for loc, lastmod in found.pages:
                if listed >= self.max_pages:
                    return
                listed += 1
                yield self._page(normalize_url(loc), lastmod, deadline)

    def _page(self, url: str, lastmod: str, deadline: float) -> SourceItem:
        """A page the sitemap lists: versioned by its lastmod, else fetched now and versioned by its bytes."""
        if not self._same_host(url):
            return SourceItem(url, error=f"not on the sitemap's host {self.host!r}; not fetched")
        if not self._robots.allowed(url):
            return SourceItem(url, error="disallowed by robots.txt; not fetched")
        if lastmod:
            return SourceItem(url, version=f"lastmod:{lastmod[:64]}", name=_page_name(url))
        try:
            return self._listed_page(url, deadline)[0]
        except SourceError as exc:
            return SourceItem(url, error=str(exc))

    def _crawl(self, deadline: float) -> Iterator[SourceItem]:
        queue, queued, pages = deque([self.url]), {self.url}, 0
        while queue and pages < self.max_pages:
            self._check_time(deadline)
            url = queue.popleft()
            if not self._robots.allowed(url):
                continue
            pages += 1
            try:
                item, links = self._listed_page(url, deadline)
            except _Gone:
                continue   # not on the site (any more): not listed, so an indexed copy is deleted
            except SourceError as exc:
                yield SourceItem(url, error=str(exc))   # (a failure: its indexed copy is kept)
                continue
            yield item
            for link in links:
                if link not in queued and self._same_host(link) and len(queued) < 10 * self.max_pages:
                    queued.add(link)
                    queue.append(link)

    def _listed_page(self, url: str, deadline: float) -> tuple[SourceItem, list[str]]:
        """A page fetched while listing, and its same-host links: asked "changed since?" when the last sync kept
        its validators (a 304: unchanged, no body read, its links as kept), else fetched and hashed.

        Raises:
            _Gone: it answered 404 or 410. SourceError: any other failure.
        """
        before = self._previous.get(url)
        asked = {}
        if before is not None:
            asked = {"If-None-Match": before.get("etag") or "", "If-Modified-Since": before.get("modified") or ""}
            asked = {k: v for k, v in asked.items() if v}
        response = self.guard.get(url, deadline=deadline, headers=asked)
        if response.status in _GONE:
            raise _Gone(f"{url}: HTTP {response.status}")
        if response.status == 304 and before is not None:
            links = [str(link) for link in before.get("links", [])]
            return SourceItem(url, version=before["version"], name=str(before.get("name") or _page_name(url)),
                              state=_state(before["version"], before.get("name", ""), response.headers, links,
                                           before)), links
        self._ok(response)
        links = []
        if response.content_type in ("text/html", "application/xhtml+xml"):
            links = [link for link in _links(response) if self._same_host(link)]
        return self._fetched_item(url, response, links), links

    def _fetched_item(self, url: str, response: Response, links: list[str]) -> SourceItem:
        """An item for a page fetched while listing: its bytes kept for `fetch`, versioned by their hash."""
        digest = hashlib.sha256(response.body).hexdigest()
        if self._cache is None:
            self._cache = Path(tempfile.mkdtemp(prefix="rag-web-"))
        name = _page_name(url, response.content_type)
        (self._cache / digest).write_bytes(response.body)
        version = f"sha256:{digest}"
        return SourceItem(url, version=version, name=name, state=_state(version, name, response.headers, links))

    def _check_time(self, deadline: float) -> None:
        if time.monotonic() > deadline:
            raise IncompleteListing(f"{self.url}: listing not finished within max_seconds={self.max_seconds:g}")

    def _same_host(self, url: str) -> bool:
        parts = urlsplit(url)
        return parts.scheme in ("http", "https") and (parts.hostname or "").lower() == self.host

    @staticmethod
    def _ok(response: Response) -> Response:
        if response.status != 200:
            raise SourceError(f"{response.url}: HTTP {response.status}")
        return response

    # ------------------------------------------------------------------ fetching
    def fetch(self, item: SourceItem) -> Fetched:
        """The page's bytes (kept from the listing, else fetched now) as a local file of its type."""
        cached = self._cache / item.version.removeprefix("sha256:") if self._cache is not None else None
        if cached is not None and item.version.startswith("sha256:") and cached.exists():
            return write_temporary(item.name, cached.read_bytes())
        response = self._ok(self.guard.get(item.id))
        return write_temporary(_page_name(item.id, response.content_type), response.body)

    def close(self) -> None:
        """Remove the pages kept from the listing."""
        if self._cache is not None:
            shutil.rmtree(self._cache, ignore_errors=True)
            self._cache = None


class _Gone(SourceError):
    """A page answered 404 or 410: it is not on the site (any more)."""


def _state(version: str, name: str, headers: Mapping[str, str], links: list[str],
           before: Mapping[str, Any] | None = None) -> str:
    """What a page keeps with its record for the next sync's conditional GET ("" when its server sent no validator).

    A 304 may repeat or update the validators; those it does not send are kept from `before`.
    """
    etag = headers.get("etag") or (before or {}).get("etag") or ""
    modified = headers.get("last-modified") or (before or {}).get("modified") or ""
    if not etag and not modified:
        return ""
    return json.dumps({"version": version, "name": name, "etag": etag[:256], "modified": modified[:64],
                       "links": links}, separators=(",", ":"))


def _page_name(url: str, content_type: str = "") -> str:
    """A file name for a page: its URL's own suffix when the loaders read it, else the suffix of its media type."""
    path = PurePosixPath(urlsplit(url).path)
    suffix = _SUFFIXES.get(content_type) or (path.suffix.lower() if path.suffix.lower() in _PAGE_SUFFIXES else ".html")
    return local_name((path.stem or "index") + suffix)


def _links(response: Response) -> list[str]:
    """The http(s) links of an HTML page, absolute, without fragments."""
    try:
        root = html.fromstring(response.body)
    except (ValueError, TypeError, html.etree.ParserError):
        return []
    found = []
    for href in root.xpath("//a/@href")[:5000]:
        link = urljoin(response.url, str(href).strip())
        if urlsplit(link).scheme in ("http", "https"):
            found.append(normalize_url(link))
    return found
