"""Text and paths made safe to store, embed and print (NUL bytes, lone surrogates, undecodable names)."""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["clean_text", "path_text"]

_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """Make text safe to store and embed: drop NUL bytes, replace lone surrogates with U+FFFD.

    Example:
        >>> clean_text("a\\x00b \\ud800c")
        'ab \\ufffdc'
    """
    if "\x00" in text:
        text = text.replace("\x00", "")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = _SURROGATE.sub("\ufffd", text)
    return text


def path_text(path: str | Path) -> str:
    """A path as text that can be stored and printed.

    Bytes of a file name that are not UTF-8 (which Python turns into lone surrogates) are
    written as `\\xNN`, so the same file gets the same text on every run.

    Example:
        >>> path_text("/data/caf\\udce9.txt")
        '/data/caf\\\\xe9.txt'
    """
    text = str(path)
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # surrogates that did not come from undecodable bytes
        return clean_text(text)
