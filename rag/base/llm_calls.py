"""What a LangChain model call says about itself: the model's name and the tokens it used.

Shared by the tracer (`rag.base.tracing`, span attributes) and the usage counter
(`rag.models.usage`, the `usage` extra), so both read a call the same way.

Example:
    >>> from langchain_core.messages import AIMessage
    >>> from langchain_core.outputs import ChatGeneration, LLMResult
    >>> message = AIMessage(content="hi", usage_metadata={"input_tokens": 7, "output_tokens": 2, "total_tokens": 9},
    ...                     response_metadata={"model_name": "gpt-4o-mini"})
    >>> call_usage(LLMResult(generations=[[ChatGeneration(message=message)]]))
    ({'input_tokens': 7, 'output_tokens': 2, 'total_tokens': 9}, 'gpt-4o-mini')
"""

from __future__ import annotations

from typing import Any

__all__ = ["call_usage", "requested_model"]


def requested_model(serialized: dict[str, Any] | None, metadata: dict[str, Any] | None,
                    params: dict[str, Any] | None) -> str | None:
    """The model a call asks for: LangChain's `ls_model_name`, else the invocation's model settings."""
    params = params or {}
    name = ((metadata or {}).get("ls_model_name") or params.get("model") or params.get("model_name")
            or params.get("model_path") or params.get("_type") or (serialized or {}).get("name"))
    return str(name) if name else None


def call_usage(response: Any) -> tuple[dict[str, int], str | None]:
    """Tokens summed over a call's generations (total = input + output when the model gives none), and the
    model name the response reports (None when it reports none)."""
    usage = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
    model = None
    for generations in response.generations:
        for gen in generations:
            message = getattr(gen, "message", None)
            meta = getattr(message, "usage_metadata", None) or {}
            for key in usage:
                usage[key] += int(meta.get(key, 0) or 0)
            model = (getattr(message, "response_metadata", None) or {}).get("model_name") or model
    if not usage["total_tokens"]:
        usage["total_tokens"] = usage["input_tokens"] + usage["output_tokens"]
    return usage, model
