"""Config blocks of who may read what: a knowledge base's `permissions:` and the server's `identities:`.

```yaml
resources:
  - name: docs
    kind: knowledge_base
    index: {paths: [docs]}
    permissions:                       # who may read what this knowledge base indexes
      public_by_default: false         # a document no rule covers: nobody (true: everyone)
      rules:                           # first match wins; fnmatch on the source path (* also matches /)
        - {match: "*/team-a/*", groups: [team-a]}
        - {match: "*/handbook/*", public: true}
server:
  identities:                          # who is asking: API keys and/or bearer JWTs
    api_keys_file: keys.yaml           # or api_keys_env: RAG_API_KEYS (the same YAML in a variable)
    jwt:
      jwks_file: jwks.json             # or key_file: public.pem, or key_env: RAG_JWT_SECRET (HS*)
      algorithms: [RS256]
      audience: rag
      issuer: https://login.example.com
  public_by_default: false             # under identities: chunks without permissions are visible
```

Secrets are never in the config: key files hold SHA-256 hashes, a shared JWT secret is read from
the environment variable named. See docs/security.md.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from rag.base.acl import Permissions
from rag.config.strict import StrictModel, check_env_name

__all__ = ["IdentitiesConfig", "JWTConfig", "PermissionRule", "PermissionsConfig"]

#: Algorithms a JWT may be signed with (never `none`).
JWT_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA",
                  "HS256", "HS384", "HS512")


class PermissionRule(StrictModel):
    """Documents whose source matches `match` (fnmatch) may be read by these users and groups, or everyone."""

    match: str = Field(min_length=1)
    users: list[str] = Field(default_factory=list)
    groups: list[str] = Field(default_factory=list)
    public: bool = False

    @model_validator(mode="after")
    def _check(self) -> PermissionRule:
        Permissions.of({"users": self.users, "groups": self.groups, "public": self.public})
        return self


class PermissionsConfig(StrictModel):
    """A knowledge base's permission rules (`KnowledgeBase(permissions=...)`)."""

    public_by_default: bool = False
    rules: list[PermissionRule] = Field(default_factory=list)

    def kwargs(self) -> dict[str, Any]:
        return {"public_by_default": self.public_by_default, "rules": [r.model_dump() for r in self.rules]}


class JWTConfig(StrictModel):
    """Bearer JWTs: where the verification key is, what the token must say, which claims name who.

    Exactly one of `jwks_file` (a JSON Web Key Set), `key_file` (a PEM public key) or `key_env` (an
    environment variable holding an HMAC secret, for HS* algorithms) is given.
    """

    jwks_file: str | None = None
    key_file: str | None = None
    key_env: str | None = None
    algorithms: list[Literal[JWT_ALGORITHMS]] = Field(default_factory=lambda: ["RS256"], min_length=1)  # type: ignore[valid-type]
    audience: str | None = None
    issuer: str | None = None
    principal_claim: str = "sub"
    groups_claim: str = "groups"
    roles_claim: str = "roles"
    leeway_seconds: int = Field(default=0, ge=0, le=300)

    @field_validator("key_env")
    @classmethod
    def _check_env(cls, value: str | None) -> str | None:
        return check_env_name(value)

    @model_validator(mode="after")
    def _one_key(self) -> JWTConfig:
        given = [k for k in ("jwks_file", "key_file", "key_env") if getattr(self, k)]
        if len(given) != 1:
            raise ValueError(f"give exactly one of jwks_file, key_file, key_env (got {given or 'none'})")
        shared = {a for a in self.algorithms if a.startswith("HS")}
        if shared and not self.key_env:
            raise ValueError(f"{sorted(shared)} need a shared secret: key_env, not a public key file")
        if self.key_env and shared != set(self.algorithms):
            raise ValueError("key_env holds an HMAC secret: allow only HS256 / HS384 / HS512 with it")
        return self


class IdentitiesConfig(StrictModel):
    """Who may call the server: API keys (hashed) and/or bearer JWTs; every request then has a principal.

    `api_keys_file` / `api_keys_env`: YAML (or JSON) `[{sha256: HEX, principal: ID, groups: [...],
    roles: [...]}]`, in a file or in the environment variable named. `admin` in `roles` opens the
    admin routes.
    """

    api_keys_file: str | None = None
    api_keys_env: str | None = None
    jwt: JWTConfig | None = None

    @field_validator("api_keys_env")
    @classmethod
    def _check_env(cls, value: str | None) -> str | None:
        return check_env_name(value)

    @model_validator(mode="after")
    def _something(self) -> IdentitiesConfig:
        if not (self.api_keys_file or self.api_keys_env or self.jwt):
            raise ValueError("identities needs api_keys_file, api_keys_env or jwt")
        return self
