"""A guarded HTTP GET for web sources: no private addresses, checked redirects, bounded bytes and time.

`HttpGuard.get(url)` refuses (with a `SourceError` saying what was refused and how to allow it):

- a scheme other than http / https, a URL with user info, a port outside 1-65535;
- a host that resolves to a loopback, private, link-local, multicast, reserved or unspecified
  address, unless `allow_private=True` (every address the name resolves to is checked, and the
  connection goes to the address that was checked, so a second DNS answer cannot swap it);
- a redirect to any of those (each hop is checked the same way), more than `max_redirects` hops,
  or, with `same_host`, a hop to another host;
- a body over `max_bytes` (the `Content-Length`, then the bytes read: a body that never ends is cut
  there), a gzip body that decompresses to more than `max_bytes` (a gzip bomb), and a response not
  finished within `timeout` seconds.

Connections are kept alive and reused for the next request to the same checked address (a sync's
pages share a few connections; `close()` ends them); every request is checked as above all the same,
redirects too. `get(url, headers=...)` adds request headers: a conditional GET's `If-None-Match` /
`If-Modified-Since` (a 304 answer has no body).

Example:
    >>> HttpGuard().get("http://127.0.0.1:1/")
    Traceback (most recent call last):
    ...
    rag.sources.base.SourceError: http://127.0.0.1:1/: refused: 127.0.0.1 is a loopback address (allow_private=True, or a list of networks, allows loopback and private addresses)
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
import threading
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

from rag.base.errors import ConfigError
from rag.sources.base import SourceError

__all__ = ["HttpGuard", "Response", "normalize_url"]

_KINDS = (("loopback", "is_loopback"), ("private", "is_private"), ("link-local", "is_link_local"),
          ("multicast", "is_multicast"), ("reserved", "is_reserved"), ("unspecified", "is_unspecified"))
_REDIRECTS = (301, 302, 303, 307, 308)
#: request headers a caller may add (a conditional GET)
_EXTRA_HEADERS = ("if-none-match", "if-modified-since")
#: kept-alive connections per address (requests are sequential; a few threads may share a guard)
_KEEP = 4
USER_AGENT = "rag-runnables/0.1 (+https://github.com/; sources)"


@dataclass(frozen=True)
class Response:
    """A fetched response: the final URL (after redirects), status, headers (lower-case names) and body."""

    url: str
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def content_type(self) -> str:
        """The media type, lower case, without parameters ("text/html")."""
        return self.headers.get("content-type", "").split(";")[0].strip().lower()


def normalize_url(url: str) -> str:
    """The URL without its fragment, with a lower-case scheme and host, and "/" for an empty path.

    Example:
        >>> normalize_url("HTTPS://Example.ORG#top")
        'https://example.org/'
    """
    parts = urlsplit(url.strip())
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path or "/", parts.query, ""))


class HttpGuard:
    """GET with the guards of the module docstring.

    Args:
        allow_private: True allows every loopback and private address (a local server, an intranet); a list of
            networks ("127.0.0.1/32", "10.1.0.0/16") allows those only; False (default) allows none.
        max_bytes: the largest body kept (after decompression).
        timeout: seconds one response may take, connection to last byte.
        max_redirects: hops followed.
        same_host: refuse redirects to another host.
    """

    def __init__(self, *, allow_private: bool | Sequence[str] = False, max_bytes: int = 10 * 1024 * 1024,
                 timeout: float = 20.0, max_redirects: int = 5, same_host: bool = False) -> None:
        self.allow_private = allowed_networks(allow_private)
        self.max_bytes, self.timeout = int(max_bytes), float(timeout)
        self.max_redirects, self.same_host = int(max_redirects), bool(same_host)
        self._idle: dict[tuple[str, str, int, str], list[http.client.HTTPConnection]] = {}   # kept alive, by address
        self._lock = threading.Lock()
        self.connections = 0   # connections opened (a sync's pages share them)

    def get(self, url: str, *, deadline: float | None = None, headers: Mapping[str, str] | None = None) -> Response:
        """The response to GET `url`, after checked redirects; `SourceError` when refused or over a bound.

        `headers`: extra request headers (a conditional GET's `If-None-Match`, `If-Modified-Since`), sent on
        every hop.
        """
        extra = {str(k): str(v) for k, v in (headers or {}).items() if str(k).lower() in _EXTRA_HEADERS}
        first = urlsplit(url).hostname
        current = url
        for _hop in range(self.max_redirects + 1):
            response = self._get_once(current, deadline, extra)
            if response.status not in _REDIRECTS:
                return response
            location = response.headers.get("location", "")
            if not location:
                raise SourceError(f"{url}: redirect {response.status} without a Location")
            target = urljoin(current, location)
            try:
                self._check(target)   # (the hop's scheme and addresses first: a refused address is named as such)
            except SourceError as exc:
                raise SourceError(f"{_short(url)}: redirect to {exc}") from exc
            if self.same_host and urlsplit(target).hostname != first:
                raise SourceError(f"{url}: refused: redirect to another host ({_short(target)})")
            current = target
        raise SourceError(f"{url}: more than {self.max_redirects} redirects")

    def _check(self, url: str) -> tuple[str, int, str]:
        """The host, port and checked address of `url`; `SourceError` for a refused scheme, user info or address."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https"):
            raise SourceError(f"{_short(url)}: refused: scheme {parts.scheme or '(none)'!r}; valid: http, https")
        if parts.username is not None or parts.password is not None:
            raise SourceError(f"{_short(url)}: refused: user info in the URL")
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError as exc:
            raise SourceError(f"{_short(url)}: bad port ({exc})") from exc
        if not parts.hostname:
            raise SourceError(f"{_short(url)}: no host")
        return parts.hostname, port, self.checked_address(url, parts.hostname, port)

    def _get_once(self, url: str, deadline: float | None, extra: Mapping[str, str]) -> Response:
        parts = urlsplit(url)
        host, port, address = self._check(url)   # (every request, a kept-alive connection's too)
        end = time.monotonic() + self.timeout
        if deadline is not None:
            end = min(end, deadline)
        key = (parts.scheme, host, port, address)
        target = urlunsplit(("", "", parts.path or "/", parts.query, ""))
        request = {"User-Agent": USER_AGENT, "Accept-Encoding": "gzip, identity",
                   "Host": parts.netloc.rsplit("@", 1)[-1], **extra}
        conn, reused = self._take(key, end)
        keep = False
        try:
            try:
                conn.request("GET", target, headers=request)
                raw = conn.getresponse()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                if not reused:
                    raise
                conn.close()   # the server closed a kept-alive connection meanwhile: once more on a new one
                conn, reused = self._take(key, end, fresh=True)
                conn.request("GET", target, headers=request)
                raw = conn.getresponse()
            headers = {k.lower(): v for k, v in raw.getheaders()}
            body = b"" if raw.status in _REDIRECTS else self._body(url, raw, headers, end)
            keep = raw.status not in _REDIRECTS and not raw.will_close and raw.isclosed()
            return Response(url, raw.status, headers, body)
        except (OSError, http.client.HTTPException) as exc:
            raise SourceError(f"{_short(url)}: {type(exc).__name__}: {exc}") from exc
        finally:
            self._give_back(key, conn, keep)

    def _take(self, key: tuple[str, str, int, str], end: float, *,
              fresh: bool = False) -> tuple[http.client.HTTPConnection, bool]:
        """A kept-alive connection to the checked address of `key` (its timeout set to what is left), else a new one."""
        timeout = max(0.1, end - time.monotonic())
        with self._lock:
            idle = None if fresh else (self._idle.get(key) or [None]).pop()
        if idle is not None and idle.sock is not None:
            idle.timeout = timeout
            idle.sock.settimeout(timeout)
            return idle, True
        self.connections += 1
        return _connection(key[0], key[1], key[2], key[3], timeout), False

    def _give_back(self, key: tuple[str, str, int, str], conn: http.client.HTTPConnection, keep: bool) -> None:
        """Keep `conn` for the next request to its address when its response was read to the end, else close it."""
        if keep and conn.sock is not None:
            with self._lock:
                idle = self._idle.setdefault(key, [])
                if len(idle) < _KEEP:
                    idle.append(conn)
                    return
        conn.close()

    def close(self) -> None:
        """Close the kept-alive connections (the next request opens new ones)."""
        with self._lock:
            idle, self._idle = self._idle, {}
        for conns in idle.values():
            for conn in conns:
                conn.close()

    def checked_address(self, url: str, host: str, port: int) -> str:
        """The first address `host` resolves to, after checking all of them (`SourceError` naming a refused one)."""
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise SourceError(f"{_short(url)}: cannot resolve {host[:80]!r} ({exc})") from exc
        addresses = [info[4][0] for info in infos]
        if self.allow_private is not True:
            for address in addresses:
                refused = self.refused(address)
                if refused:
                    raise SourceError(f"{_short(url)}: refused: {refused} (allow_private=True, or a list of networks, "
                                      "allows loopback and private addresses)")
        if not addresses:
            raise SourceError(f"{_short(url)}: {host[:80]!r} has no address")
        return addresses[0]

    def refused(self, address: str) -> str:
        """Why `address` is refused ("10.0.0.1 is a private address"), or "" when it may be reached."""
        ip = ipaddress.ip_address(address.split("%")[0])
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        if self.allow_private is True or any(ip in network for network in self.allow_private or ()):
            return ""
        for kind, attribute in _KINDS:
            if getattr(ip, attribute):
                return f"{ip} is a {kind} address"
        return "" if ip.is_global else f"{ip} is not a global address"

    def _body(self, url: str, raw: http.client.HTTPResponse, headers: dict[str, str], end: float) -> bytes:
        length = headers.get("content-length", "")
        if length.isdigit() and int(length) > self.max_bytes:
            raise SourceError(f"{_short(url)}: {int(length):,} bytes is more than max_bytes={self.max_bytes:,}")
        gzip = headers.get("content-encoding", "").strip().lower() in ("gzip", "x-gzip")
        inflate = zlib.decompressobj(16 + zlib.MAX_WBITS) if gzip else None
        body = bytearray()
        while True:
            if time.monotonic() > end:
                raise SourceError(f"{_short(url)}: not finished within {self.timeout:g} s (timeout)")
            block = raw.read1(65536) if hasattr(raw, "read1") else raw.read(65536)
            if not block:
                break
            if inflate is not None:
                try:
                    block = inflate.decompress(block, self.max_bytes + 1 - len(body))
                except zlib.error as exc:
                    raise SourceError(f"{_short(url)}: bad gzip body ({exc})") from exc
            body += block
            if len(body) > self.max_bytes:
                what = "decompresses to" if inflate is not None else "sent"
                raise SourceError(f"{_short(url)}: {what} more than max_bytes={self.max_bytes:,} bytes")
        if raw.length == 0:
            raw.read()   # (read1 leaves a response whose Content-Length is read open: done, the connection is free)
        return bytes(body)


def allowed_networks(value: bool | Sequence[str]) -> bool | tuple[Any, ...]:
    """True, False, or the networks a list names (`ConfigError` for one that does not parse)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ConfigError(f"allow_private must be true, false or a list of networks, got {str(value)[:80]!r}")
    try:
        return tuple(ipaddress.ip_network(str(n), strict=False) for n in value)
    except ValueError as exc:
        raise ConfigError(f"allow_private: {exc}; give networks such as '127.0.0.1/32' or '10.0.0.0/8'") from exc


def _connection(scheme: str, host: str, port: int, address: str, timeout: float) -> http.client.HTTPConnection:
    """A connection to the checked `address`, speaking to `host` (TLS verified against `host`)."""
    if scheme == "https":
        conn: http.client.HTTPConnection = http.client.HTTPSConnection(host, port, timeout=timeout,
                                                                        context=ssl.create_default_context())
    else:
        conn = http.client.HTTPConnection(host, port, timeout=timeout)
    # connect to the address that was checked, never to a second answer of the resolver
    conn._create_connection = lambda _addr, *args, **kwargs: socket.create_connection(  # noqa: SLF001
        (address, port), *args, **kwargs)
    return conn


def _short(url: str) -> str:
    return url if len(url) <= 200 else url[:200] + "..."
