"""Prices per million tokens, for the cost of each step; users add their own models.

Prices are USD per 1M tokens `(input, output)`. Local and offline models cost 0. A model that
is not in the table gets a cost of None (unknown), never a guess. Model names are matched
exactly first, then by the longest known prefix (so "gpt-4o-mini-2024-07-18" finds "gpt-4o-mini").

Example:
    >>> register_price("my-model", input_per_million=1.0, output_per_million=2.0)
    >>> cost("my-model", input_tokens=1_000_000, output_tokens=500_000)
    2.0
    >>> cost("nobody-knows", input_tokens=10, output_tokens=10) is None
    True
"""

from __future__ import annotations

import threading

from rag.base.errors import ConfigError

__all__ = ["PRICES", "cost", "price_of", "register_price"]

#: model name -> (USD per 1M input tokens, USD per 1M output tokens). List prices; check your provider's.
PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4.1": (2.00, 8.00),
    "llama-cpp": (0.0, 0.0),
    "SmolLM2-135M-Instruct.Q4_1.gguf": (0.0, 0.0),
    "extractive": (0.0, 0.0),
}
_lock = threading.Lock()


def register_price(model: str, *, input_per_million: float, output_per_million: float) -> None:
    """Add or replace a model's price (USD per million tokens)."""
    if not model:
        raise ConfigError("model name must be a non-empty string")
    if input_per_million < 0 or output_per_million < 0:
        raise ConfigError(f"prices must be >= 0, got {input_per_million} and {output_per_million}")
    with _lock:
        PRICES[model] = (float(input_per_million), float(output_per_million))


def price_of(model: str | None) -> tuple[float, float] | None:
    """`(input, output)` USD per 1M tokens, or None for an unknown model."""
    if not model:
        return None
    with _lock:
        if model in PRICES:
            return PRICES[model]
        prefixes = sorted((name for name in PRICES if model.startswith(name)), key=len, reverse=True)
        return PRICES[prefixes[0]] if prefixes else None


def cost(model: str | None, *, input_tokens: int, output_tokens: int) -> float | None:
    """Cost in USD of one call, or None when the model's price is unknown."""
    price = price_of(model)
    if price is None:
        return None
    return round((input_tokens * price[0] + output_tokens * price[1]) / 1_000_000, 8)
