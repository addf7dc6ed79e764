"""`WebSource` against a real HTTP server on loopback (explicitly allowed): sitemaps, crawls and hostile sites."""

from __future__ import annotations

import gzip
import ipaddress
from http.server import BaseHTTPRequestHandler

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from source_helpers import Route, Site

from rag.base.errors import ConfigError
from rag.sources.base import SourceError
from rag.sources.http import HttpGuard
from rag.sources.sitemap import parse_sitemap
from rag.sources.web import WebSource

LOOPBACK = ["127.0.0.1/32"]   # only the test server: every other private address stays refused

def _site_with_pages(site: Site) -> None:
    for n in range(3):
        site.page(f"/p{n}", f"Page {n}", f"Page {n} explains topic number {n} in a sentence.")
    site.sitemap("/sitemap.xml", {f"/p{n}": "2025-01-01" for n in range(3)})


def test_a_sitemap_is_indexed_and_a_re_sync_fetches_only_the_sitemap(kb, site, counting):
    _site_with_pages(site)
    source = WebSource(site.base + "/sitemap.xml", allow_private=LOOPBACK)
    report = kb.sync(source)
    assert sorted(report.added) == [f"{site.base}/p{n}" for n in range(3)]
    assert kb.get_documents({"source": f"{site.base}/p1"})[0].metadata["title"] == "Page 1"
    site.requests.clear()
    counting.texts.clear()
    again = kb.sync(source)
    assert site.pages_requested() == [] and again.embedded == 0 and not again.changed


def test_a_new_lastmod_refetches_that_page_only_and_a_page_gone_from_the_sitemap_is_deleted(kb, site):
    _site_with_pages(site)
    source = WebSource(site.base + "/sitemap.xml", allow_private=LOOPBACK)
    kb.sync(source)
    site.page("/p1", "Page 1", "Page 1 now explains something new.")
    site.sitemap("/sitemap.xml", {"/p0": "2025-01-01", "/p1": "2025-02-01"})
    site.requests.clear()
    report = kb.sync(source)
    assert site.pages_requested() == ["/p1"]
    assert report.updated == [f"{site.base}/p1"] and report.deleted == [f"{site.base}/p2"]


def test_a_crawl_stays_on_the_host_honours_robots_txt_and_stops_at_max_pages(kb, site):
    site.routes["/robots.txt"] = (200, {"Content-Type": "text/plain"}, b"User-agent: *\nDisallow: /private/\n")
    site.page("/", "Home", "The home page of the site.", ["/p1", "/private/x", "http://example.org/elsewhere"])
    site.page("/p1", "One", "The first linked page.", ["/p2", "/"])
    site.page("/p2", "Two", "The second linked page.", ["/p3"])
    site.page("/p3", "Three", "The third linked page.")
    site.page("/private/x", "Private", "Must never be fetched.")
    report = kb.sync(WebSource(site.base + "/", allow_private=LOOPBACK, max_pages=3))
    assert sorted(report.added) == [f"{site.base}/", f"{site.base}/p1", f"{site.base}/p2"]
    assert "/private/x" not in site.requests


def test_loopback_is_refused_unless_allowed(kb, site):
    _site_with_pages(site)
    report = kb.sync(WebSource(site.base + "/sitemap.xml"))
    assert report.added == [] and "127.0.0.1 is a loopback address" in report.skipped[0].reason
    assert site.requests == []   # refused before connecting


def _redirect(location: str) -> Route:
    return (302, {"Location": location}, b"")


@pytest.mark.parametrize("target", ["http://169.254.169.254/latest/meta-data/", "http://10.0.0.1/", "http://[::1]/",
                                    "http://127.0.0.2/", "file:///etc/passwd"])
def test_a_redirect_to_a_private_address_is_an_error_for_that_page_and_the_run_goes_on(kb, site, target):
    _site_with_pages(site)
    site.routes["/p1"] = _redirect(target)
    report = kb.sync(WebSource(site.base + "/sitemap.xml", allow_private=LOOPBACK))
    assert sorted(report.added) == [f"{site.base}/p0", f"{site.base}/p2"]
    reason = report.skipped[0].reason
    assert reason.startswith(f"{site.base}/p1: redirect to ") and "refused" in reason


def test_a_response_far_over_the_size_limit_is_refused_unread(kb, site):
    _site_with_pages(site)
    site.routes["/p1"] = (200, {"Content-Type": "text/html"}, b"<p>" + b"x" * 3_000_000 + b"</p>")
    report = kb.sync(WebSource(site.base + "/sitemap.xml", allow_private=LOOPBACK, max_bytes=100_000))
    assert len(report.added) == 2 and "3,000,007 bytes is more than max_bytes=100,000" in report.skipped[0].reason


def _endless(handler: BaseHTTPRequestHandler) -> None:
    """A body without length that never ends (until the client hangs up)."""
    handler.send_response(200)
    handler.send_header("Content-Type", "application/xml")
    handler.end_headers()
    try:
        handler.wfile.write(b'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">')
        while True:
            handler.wfile.write(b"<url><loc>http://127.0.0.1/x</loc></url>" * 100)
    except OSError:
        pass


def test_a_page_that_never_ends_is_cut_at_max_bytes(kb, site):
    _site_with_pages(site)
    site.routes["/p1"] = _endless
    report = kb.sync(WebSource(site.base + "/sitemap.xml", allow_private=LOOPBACK, max_bytes=200_000))
    assert len(report.added) == 2 and "sent more than max_bytes=200,000" in report.skipped[0].reason


def test_a_sitemap_that_never_ends_stops_the_listing_and_deletes_nothing(kb, site):
    _site_with_pages(site)
    source = WebSource(site.base + "/sitemap.xml", allow_private=LOOPBACK, max_bytes=200_000)
    kb.sync(source)
    site.routes["/sitemap.xml"] = _endless
    report = kb.sync(source)
    assert report.deleted == [] and len(kb.list_documents()) == 3
    assert "more than max_bytes" in report.skipped[0].reason and "nothing deleted" in report.skipped[0].reason


def _index(site: Site, path: str, children: list[str]) -> None:
    entries = "".join(f"<sitemap><loc>{site.base}{c}</loc></sitemap>" for c in children)
    xml = f'<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}</sitemapindex>'
    site.routes[path] = (200, {"Content-Type": "application/xml"}, xml.encode())


def test_a_sitemap_index_that_names_itself_is_read_once(kb, site):
    _site_with_pages(site)
    _index(site, "/index.xml", ["/index.xml", "/sitemap.xml", "/index.xml"])
    report = kb.sync(WebSource(site.base + "/index.xml", allow_private=LOOPBACK))
    assert len(report.added) == 3 and site.requests.count("/index.xml") == 1


def test_a_chain_of_sitemaps_without_end_stops_at_max_sitemaps(kb, site):
    for n in range(40):
        _index(site, f"/s{n}.xml", [f"/s{n + 1}.xml"])
    report = kb.sync(WebSource(site.base + "/s0.xml", allow_private=LOOPBACK, max_sitemaps=10))
    assert "more than max_sitemaps=10" in report.skipped[0].reason
    assert site.requests.count("/s10.xml") == 0


def test_a_gzip_bomb_is_refused_at_max_bytes(kb, site):
    _site_with_pages(site)
    bomb = gzip.compress(b"<p>" + b"a" * 50_000_000 + b"</p>", compresslevel=9)
    assert len(bomb) < 100_000
    site.routes["/p1"] = (200, {"Content-Type": "text/html", "Content-Encoding": "gzip"}, bomb)
    report = kb.sync(WebSource(site.base + "/sitemap.xml", allow_private=LOOPBACK, max_bytes=1_000_000))
    assert len(report.added) == 2 and "decompresses to more than max_bytes" in report.skipped[0].reason


def test_an_entity_bomb_sitemap_is_refused(kb, site):
    lol = '<!DOCTYPE lolz [<!ENTITY lol "lol">' + "".join(
        f'<!ENTITY lol{n} "{("&lol%s;" % (n - 1 if n else "")) * 10}">' for n in range(1, 9)) + "]>"
    xml = (f'<?xml version="1.0"?>{lol}<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
           f"<url><loc>{site.base}/p0</loc><lastmod>&lol8;</lastmod></url></urlset>")
    site.routes["/sitemap.xml"] = (200, {"Content-Type": "application/xml"}, xml.encode())
    site.page("/p0", "Page 0", "Text.")
    report = kb.sync(WebSource(site.base + "/sitemap.xml", allow_private=LOOPBACK))
    assert report.added == [] and "declares a DOCTYPE" in report.skipped[0].reason


def test_options_are_checked():
    with pytest.raises(ConfigError, match="http"):
        WebSource("ftp://example.org/")
    with pytest.raises(ConfigError, match="allow_private"):
        WebSource("https://example.org/", allow_private=["not a network"])
    with pytest.raises(ConfigError, match="max_pages"):
        WebSource("https://example.org/", max_pages=0)


_private = st.one_of(
    st.integers(0, 2**24 - 1).map(lambda n: str(ipaddress.IPv4Address((10 << 24) + n))),
    st.integers(0, 2**16 - 1).map(lambda n: str(ipaddress.IPv4Address((192 << 24) + (168 << 16) + n))),
    st.integers(0, 2**20 - 1).map(lambda n: str(ipaddress.IPv4Address((172 << 24) + (16 << 16) + n))),
    st.integers(0, 2**24 - 1).map(lambda n: str(ipaddress.IPv4Address((127 << 24) + n))),
    st.integers(0, 2**16 - 1).map(lambda n: str(ipaddress.IPv4Address((169 << 24) + (254 << 16) + n))),
    st.integers(0, 2**24 - 1).map(lambda n: f"::ffff:{ipaddress.IPv4Address((10 << 24) + n)}"),
    st.sampled_from(["::1", "0.0.0.0", "::", "fe80::1", "fc00::1", "224.0.0.1", "100.64.0.1"]),
)


@settings(max_examples=200, deadline=None)
@given(address=_private)
def test_every_private_loopback_or_link_local_address_is_refused(address):
    assert HttpGuard().refused(address)
    assert HttpGuard(allow_private=True).refused(address) == ""


@settings(max_examples=100, deadline=None)
@given(scheme=st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=8).filter(
    lambda s: s.lower() not in ("http", "https")),
       rest=st.text(max_size=30))
def test_a_url_of_any_other_scheme_is_refused_before_anything_is_sent(scheme, rest):
    with pytest.raises(SourceError):
        HttpGuard(allow_private=True).get(f"{scheme}://{rest}")


@settings(max_examples=200, deadline=None)
@given(body=st.one_of(st.binary(max_size=300), st.text(max_size=300).map(str.encode),
                      st.lists(st.sampled_from(["<urlset>", "</urlset>", "<url>", "</url>", "<loc>", "</loc>",
                                                "<sitemapindex>", "<sitemap>", "<!DOCTYPE x>", "&e;", "x", "\x1f\x8b"]),
                               max_size=30).map(lambda parts: "".join(parts).encode())))
def test_any_sitemap_body_parses_or_is_one_source_error(body):
    try:
        found = parse_sitemap(body, max_bytes=10_000)
    except SourceError as exc:
        assert str(exc)
    else:
        assert all(isinstance(loc, str) for loc, _ in found.pages)


# ----------------------------------------------------------------------------- conditional GETs, kept-alive connections
def _chain(site: Site, pages: int, version: str = "") -> None:
    """A home page linking to /p0, each page linking to the next: a crawl finds /p{n} only through /p{n-1}."""
    site.page("/", "Home", "The start page.", ["/p0"])
    for n in range(pages):
        site.page(f"/p{n}", f"Page {n}", f"Page {n} explains topic {n}{version}.",
                  [f"/p{n + 1}"] if n + 1 < pages else [])


@pytest.mark.parametrize("validators", [True, "etag", "modified"])
def test_a_crawl_re_sync_asks_changed_since_and_reads_no_body(kb, counting, validators):
    site = Site(validators=validators, keep_alive=True)
    try:
        _chain(site, 6)
        source = WebSource(site.base + "/", allow_private=LOOPBACK)
        first = kb.sync(source)
        assert len(first.added) == 7 and sorted(site.bodies) == sorted(["/", *(f"/p{n}" for n in range(6))])
        site.bodies.clear(), site.conditional.clear(), counting.texts.clear()
        site.connections = 0
        again = kb.sync(source)
        # every page answered 304: no body sent, its links followed as kept (p5 is reached through five 304s)
        assert site.bodies == [] and len(again.unchanged) == 7 and not again.changed and again.embedded == 0
        assert sorted(site.conditional) == sorted(["/", *(f"/p{n}" for n in range(6))])
        assert site.connections == 1   # robots.txt and seven pages on one kept-alive connection
        site.page("/p3", "Page 3", "Page 3 now explains something else.", ["/p4"])
        site.routes_modified["/p3"] = "Thu, 02 Jan 2025 00:00:00 GMT"
        site.bodies.clear()
        changed = kb.sync(source)
        assert site.bodies == ["/p3"] and changed.updated == [f"{site.base}/p3"] and not changed.deleted
        site.bodies.clear()
        assert kb.sync(source).unchanged and site.bodies == []   # the new validators were kept
    finally:
        site.server.shutdown()


def test_a_server_without_validators_is_fetched_and_hashed_again(kb, counting):
    site = Site(keep_alive=True)
    try:
        _chain(site, 3)
        source = WebSource(site.base + "/", allow_private=LOOPBACK)
        kb.sync(source)
        site.bodies.clear(), counting.texts.clear()
        again = kb.sync(source)
        assert sorted(site.bodies) == ["/", "/p0", "/p1", "/p2"] and site.conditional == []
        assert len(again.unchanged) == 4 and again.embedded == 0
    finally:
        site.server.shutdown()


@pytest.mark.parametrize("target", ["http://169.254.169.254/latest/meta-data/", "http://10.0.0.1/"])
def test_a_conditional_re_sync_still_checks_every_redirect(kb, target):
    site = Site(validators=True, keep_alive=True)
    try:
        _site_with_pages(site)
        site.page("/", "Home", "The start page.", ["/p0", "/p1", "/p2"])
        source = WebSource(site.base + "/", allow_private=LOOPBACK)
        kb.sync(source)
        site.routes["/p1"] = _redirect(target)   # (p1 was indexed: now a redirect to a private address)
        report = kb.sync(source)
        assert [s.path for s in report.skipped] == [f"{site.base}/p1"] and "refused" in report.skipped[0].reason
        assert f"{site.base}/p0" in report.unchanged and not report.deleted   # the rest asked and unchanged
    finally:
        site.server.shutdown()


def test_a_kept_alive_connection_is_reused_but_every_request_is_checked_again():
    from rag.sources.http import allowed_networks

    site = Site(keep_alive=True)
    try:
        site.page("/a", "A", "a")
        guard = HttpGuard(allow_private=LOOPBACK)
        assert guard.get(site.base + "/a").status == 200 and guard.get(site.base + "/a").status == 200
        assert guard.connections == 1 and site.connections == 1
        guard.allow_private = allowed_networks(False)   # an idle connection to the address does not bypass the check
        with pytest.raises(SourceError, match="127.0.0.1 is a loopback address"):
            guard.get(site.base + "/a")
        guard.close()
    finally:
        site.server.shutdown()


@given(st.one_of(st.text(max_size=200), st.builds(lambda n, c: c * n, st.integers(1, 50_000), st.sampled_from("[{"))))
@settings(max_examples=60, deadline=None)
def test_any_kept_state_is_taken_or_ignored_never_an_error(text):
    # What a record keeps for a page (`source_state`) is read back from the records file: anything there,
    # a damaged value or one nested too deep to parse, is ignored (the page is fetched and hashed again).
    source = WebSource("http://127.0.0.1:9/", allow_private=LOOPBACK)
    source.previous({"http://127.0.0.1:9/a": text,
                     "http://127.0.0.1:9/b": '{"version": "v1", "etag": "\\"e\\"", "links": []}'})
    assert set(source._previous) <= {"http://127.0.0.1:9/a", "http://127.0.0.1:9/b"}
    assert "http://127.0.0.1:9/b" in source._previous
