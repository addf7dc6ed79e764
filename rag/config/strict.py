"""The base of every config model: unknown keys are errors listing the valid ones; secrets are variable names.

Example:
    >>> check_env_name("OPENAI_API_KEY")
    'OPENAI_API_KEY'
"""

from __future__ import annotations

import re
from typing import Any, get_args

from pydantic import BaseModel, ConfigDict, model_validator

from rag.base.errors import short_repr

__all__ = ["StrictModel", "check_env_name", "kind_of"]

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SECRET_KEYS = ("api_key", "token", "password", "secret")


class StrictModel(BaseModel):
    """A pydantic model that rejects unknown keys with a message listing the valid ones."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _reject_unknown(cls, data: Any) -> Any:
        if isinstance(data, dict):
            valid = list(cls.model_fields)
            unknown = [k for k in data if k not in valid]
            if unknown:
                hint = ""
                if any(k in _SECRET_KEYS for k in unknown):
                    hint = (" (secrets are never written in a config: give the name of an environment "
                            "variable, e.g. api_key_env)")
                word = "key" if len(unknown) == 1 else "keys"
                shown = ", ".join(short_repr(k) for k in unknown[:10])
                raise ValueError(f"unknown {word} {shown}; valid: {', '.join(valid)}{hint}")
        return data


def kind_of(model: type[BaseModel]) -> str:
    """The `kind:` a resource or store config model takes: its `kind` field's one `Literal` value (the YAML
    dialect names each kind once, there)."""
    (kind,) = get_args(model.model_fields["kind"].annotation)
    return kind


def check_env_name(value: str | None) -> str | None:
    """Accept only environment-variable names, so a pasted secret is rejected, not stored."""
    if value is None:
        return None
    if not _ENV_NAME.match(value):
        raise ValueError(f"{value[:4]!r}... is not an environment variable name; give the NAME of the variable "
                         "that holds the secret (letters, digits, underscores), e.g. OPENAI_API_KEY")
    return value
