"""Who is asking: API keys (stored hashed) and bearer JWTs become a `Principal`, the same on every route.

A request sends `Authorization: Bearer <credential>`. With `server.identities` configured:

- a credential shaped like a JWT (three dot-separated parts) is verified with PyJWT against the
  configured key, JWKS file or shared secret; only the allow-listed algorithms are accepted (never
  `none`), and the expiry, not-before, audience and issuer are checked. The principal is the
  `principal_claim` (`sub`), its groups and roles the `groups_claim` / `roles_claim` lists;
- any other credential is an API key: its SHA-256 is compared, in constant time, with every stored
  hash (`api_keys_file` / `api_keys_env`: `[{sha256, principal, groups, roles}]`);
- the shared `auth_token_env` token, when set, still works: its principal is `token`, in no group.

A failure is a 401 whose message names only the kind (`missing credential`, `invalid credential`,
`expired token`, `token not yet valid`, `wrong audience`, `wrong issuer`), never what was expected.
Without `identities` the server keeps its single shared token and requests carry no principal.

Example:
    >>> import hashlib
    >>> keys = [{"sha256": hashlib.sha256(b"k-ann").hexdigest(), "principal": "ann", "groups": ["team-a"]}]
    >>> ids = Identities(api_keys=keys)
    >>> ids.identify("Bearer k-ann")
    Principal(id='ann', groups=frozenset({'team-a'}), roles=frozenset())
    >>> ids.identify("Bearer k-bob")
    Traceback (most recent call last):
    ...
    rag.base.errors.AccessError: unauthorized: invalid credential
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rag.base.acl import Principal
from rag.base.errors import AccessError, ConfigError, MissingDependencyError, RagError, short_repr
from rag.config.access import IdentitiesConfig, JWTConfig
from rag.config.yaml_file import load_yaml_text

__all__ = ["Identities", "hash_key"]

_HEX64 = frozenset("0123456789abcdef")


def hash_key(key: str) -> str:
    """The SHA-256 (hex) an API key is stored as: `python -c "from rag.server.identity import hash_key; ..."`."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def _deny(kind: str) -> AccessError:
    return AccessError(f"unauthorized: {kind}", status=401)


class Identities:
    """The server's credentials: API key hashes, a JWT verifier, and the legacy shared token.

    Args:
        api_keys: `[{sha256, principal, groups?, roles?}]`.
        jwt: the JWT settings (`JWTConfig`), or None.
        token: the legacy shared token (`server.auth_token_env`'s value), or "".
        enforce: whether requests must carry a credential and a principal (`server.identities` given).
    """

    def __init__(self, *, api_keys: Sequence[Mapping[str, Any]] = (), jwt: JWTConfig | None = None,
                 token: str = "", enforce: bool = True, base: Path | None = None) -> None:
        self.keys = [_api_key(entry, i) for i, entry in enumerate(api_keys)]
        self.jwt = _JWTVerifier(jwt, base or Path.cwd()) if jwt is not None else None
        self.token = token
        self.enforce = enforce

    @classmethod
    def from_config(cls, config: IdentitiesConfig | None, *, token: str, base: Path | None = None) -> Identities:
        """From `server.identities` (None: only the shared token, no principals).

        Raises:
            ConfigError: an unreadable key file or variable, a bad entry, a key file that is missing.
        """
        if config is None:
            return cls(token=token, enforce=False)
        base = base or Path.cwd()
        keys: list[Any] = []
        if config.api_keys_file:
            path = base / config.api_keys_file
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise ConfigError(f"server.identities.api_keys_file: cannot read {path.name} ({type(exc).__name__})") from None
            keys += _key_list(load_yaml_text(text, source=path.name), "api_keys_file")
        if config.api_keys_env:
            text = os.environ.get(config.api_keys_env) or ""
            if not text.strip():
                raise ConfigError(f"server.identities.api_keys_env: the environment variable {config.api_keys_env} "
                                  "is empty")
            keys += _key_list(load_yaml_text(text, source=f"${config.api_keys_env}"), "api_keys_env")
        return cls(api_keys=keys, jwt=config.jwt, token=token, enforce=True, base=base)

    @property
    def open(self) -> bool:
        """Whether requests need no credential at all (no identities and no shared token)."""
        return not self.enforce and not self.token

    def identify(self, authorization: str | None) -> Principal | None:
        """The principal of an `Authorization` header value (None: no identities configured).

        Raises:
            AccessError: 401 with the kind of failure only.
        """
        if self.open:
            return None
        scheme, _, value = (authorization or "").partition(" ")
        value = value.strip()
        if not self.enforce:   # the single shared token of a server without identities
            if scheme.lower() != "bearer" or not hmac.compare_digest(value.encode(), self.token.encode()):
                raise AccessError("missing or wrong bearer token; send 'Authorization: Bearer <token>'")
            return None
        if scheme.lower() != "bearer" or not value:
            raise _deny("missing credential; send 'Authorization: Bearer <credential>'")
        if self.token and hmac.compare_digest(value.encode(), self.token.encode()):
            return Principal("token")
        if self.jwt is not None and value.count(".") == 2:
            return self.jwt.verify(value)
        digest = hash_key(value).encode()
        found = None
        for stored, principal in self.keys:   # every entry compared: the time does not say which matched
            if hmac.compare_digest(digest, stored):
                found = principal
        if found is None:
            raise _deny("invalid credential")
        return found


def _key_list(data: Any, where: str) -> list[Any]:
    if not isinstance(data, list):
        raise ConfigError(f"server.identities.{where}: expected a list of {{sha256, principal, groups, roles}}, "
                          f"got {type(data).__name__}")
    return data


def _api_key(entry: Any, i: int) -> tuple[bytes, Principal]:
    where = f"server.identities api key {i}"
    if not isinstance(entry, Mapping) or set(entry) - {"sha256", "principal", "groups", "roles"}:
        raise ConfigError(f"{where}: expected {{sha256, principal, groups, roles}}, got keys "
                          f"{sorted(map(str, entry)) if isinstance(entry, Mapping) else type(entry).__name__}")
    digest = str(entry.get("sha256", "")).lower()
    if len(digest) != 64 or not set(digest) <= _HEX64:
        raise ConfigError(f"{where}: sha256 must be 64 hex digits (hash_key(KEY)); keys are never stored as they are")
    try:
        return digest.encode(), Principal(entry.get("principal"), entry.get("groups") or (), entry.get("roles") or ())
    except RagError as exc:
        raise ConfigError(f"{where}: {exc}") from None


class _JWTVerifier:
    """PyJWT with the configured key(s), algorithms, audience and issuer."""

    def __init__(self, config: JWTConfig, base: Path) -> None:
        try:
            import jwt
        except ImportError as exc:
            raise MissingDependencyError.for_extra("pyjwt", "server", "bearer JWTs (server.identities.jwt)") from exc
        self.jwt, self.config = jwt, config
        self.keys: dict[str | None, Any] = {}
        if config.key_env:
            secret = os.environ.get(config.key_env) or ""
            if len(secret) < 32:
                raise ConfigError(f"server.identities.jwt.key_env: {config.key_env} must hold a secret of at least "
                                  "32 characters")
            self.keys[None] = secret
        elif config.key_file:
            self.keys[None] = _read(base / config.key_file, "key_file")
        else:
            self._load_jwks(_read(base / str(config.jwks_file), "jwks_file"))

    def _load_jwks(self, text: str) -> None:
        try:
            keys = self.jwt.PyJWKSet.from_dict(json.loads(text)).keys
        except (ValueError, self.jwt.PyJWTError) as exc:
            raise ConfigError(f"server.identities.jwt.jwks_file: not a JSON Web Key Set ({type(exc).__name__})") from None
        for key in keys:
            self.keys[key.key_id] = key.key

    def verify(self, token: str) -> Principal:
        jwt, config = self.jwt, self.config
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise _deny("invalid credential") from None
        if header.get("alg") not in config.algorithms:
            raise _deny("invalid credential")
        kid = header.get("kid")
        if None in self.keys:
            key = self.keys[None]
        elif kid in self.keys or (kid is None and len(self.keys) == 1):
            key = self.keys[kid] if kid in self.keys else next(iter(self.keys.values()))
        else:
            raise _deny("invalid credential")
        try:
            claims = jwt.decode(token, key, algorithms=list(config.algorithms), audience=config.audience,
                                issuer=config.issuer, leeway=config.leeway_seconds,
                                options={"require": ["exp", *(["aud"] if config.audience else []),
                                                     *(["iss"] if config.issuer else [])]})
        except jwt.ExpiredSignatureError:
            raise _deny("expired token") from None
        except jwt.ImmatureSignatureError:
            raise _deny("token not yet valid") from None
        except jwt.InvalidAudienceError:
            raise _deny("wrong audience") from None
        except jwt.InvalidIssuerError:
            raise _deny("wrong issuer") from None
        except jwt.PyJWTError:
            raise _deny("invalid credential") from None
        try:
            return Principal(claims.get(config.principal_claim), _claim_list(claims, config.groups_claim),
                             _claim_list(claims, config.roles_claim))
        except RagError:
            raise _deny("invalid credential") from None


def _claim_list(claims: Mapping[str, Any], name: str) -> list[Any]:
    value = claims.get(name)
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list):
        raise ConfigError(f"claim {name!r} must be a list, got {short_repr(value)}")
    return value


def _read(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"server.identities.jwt.{what}: cannot read {path.name} ({type(exc).__name__})") from None
