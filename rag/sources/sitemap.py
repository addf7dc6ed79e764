"""Reading sitemaps (sitemaps.org 0.9) and robots.txt safely: no entities, no network, bounded entries.

`parse_sitemap` reads a `<urlset>` (pages with their `lastmod`) or a `<sitemapindex>` (more sitemaps),
gzip-compressed or not (bounded: a gzip bomb is refused). A document that declares a DOCTYPE is
refused (an entity bomb, an external entity), and libxml2 is told to resolve no entity, load no DTD
and fetch nothing anyway. `Robots` answers whether a URL may be fetched.

Example:
    >>> body = b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>https://a.org/x</loc>'
    >>> body += b'<lastmod>2025-01-02</lastmod></url></urlset>'
    >>> parse_sitemap(body, max_bytes=10_000)
    Sitemap(pages=[('https://a.org/x', '2025-01-02')], sitemaps=[])
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from urllib.robotparser import RobotFileParser

from lxml import etree

from rag.sources.base import SourceError

__all__ = ["Robots", "Sitemap", "parse_sitemap"]

ROBOTS_AGENT = "rag-runnables"
MAX_ENTRIES = 50_000   # the protocol's own bound per sitemap


@dataclass
class Sitemap:
    """A parsed sitemap: pages as (URL, lastmod or ""), and the sitemaps an index names."""

    pages: list[tuple[str, str]] = field(default_factory=list)
    sitemaps: list[str] = field(default_factory=list)


def gunzip(body: bytes, max_bytes: int) -> bytes:
    """`body` decompressed when it is gzip data, bounded by `max_bytes` (a gzip bomb is a `SourceError`)."""
    if not body.startswith(b"\x1f\x8b"):
        return body
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflate.decompress(body, max_bytes + 1)
    except zlib.error as exc:
        raise SourceError(f"bad gzip data ({exc})") from exc
    if len(out) > max_bytes:
        raise SourceError(f"gzip data decompresses to more than max_bytes={max_bytes:,} bytes")
    return out


def parse_sitemap(body: bytes, *, max_bytes: int) -> Sitemap:
    """The pages or sitemaps a sitemap lists (see the module docstring).

    Raises:
        SourceError: not XML, not a sitemap, or more than 50,000 entries.
    """
    body = gunzip(body, max_bytes)
    if b"<!doctype" in body[:65536].lower():
        raise SourceError("not a sitemap: it declares a DOCTYPE (entities and DTDs are refused: sitemaps have none)")
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False,
                             recover=False)
    try:
        root = etree.fromstring(body, parser=parser)
    except etree.XMLSyntaxError as exc:
        raise SourceError(f"not a sitemap: the XML does not parse ({str(exc)[:160]})") from exc
    kind = etree.QName(root).localname
    if kind not in ("urlset", "sitemapindex"):
        raise SourceError(f"not a sitemap: the root element is <{kind[:40]}>; valid: <urlset>, <sitemapindex>")
    found = Sitemap()
    for entry in root:
        if not isinstance(entry.tag, str):
            continue   # comments, processing instructions
        fields = {etree.QName(child).localname: (child.text or "").strip() for child in entry
                  if isinstance(child.tag, str)}
        loc = fields.get("loc", "")
        if not loc:
            continue
        if kind == "urlset":
            found.pages.append((loc, fields.get("lastmod", "")))
        else:
            found.sitemaps.append(loc)
        if len(found.pages) + len(found.sitemaps) > MAX_ENTRIES:
            raise SourceError(f"more than {MAX_ENTRIES:,} entries in one sitemap (the protocol's limit)")
    return found


class Robots:
    """robots.txt rules for one site (everything allowed when it has none).

    Example:
        >>> robots = Robots("User-agent: *\\nDisallow: /private/\\n")
        >>> robots.allowed("https://a.org/private/x"), robots.allowed("https://a.org/docs")
        (False, True)
    """

    def __init__(self, text: str | None) -> None:
        self._parser = RobotFileParser()
        self._parser.parse((text or "").splitlines())

    def allowed(self, url: str) -> bool:
        """Whether `url` may be fetched by this library's agent."""
        return self._parser.can_fetch(ROBOTS_AGENT, url)
