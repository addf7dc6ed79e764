"""Term lines of reference entries: the line naming what the description under it describes.

Documentation sets write a reference entry as a term on a line of its own, then its description:

- an option list (texinfo, man pages, asciidoc): "-N", "--new-file", "-c <branch>";
- an API reference (Sphinx): "class requests.auth.HTTPBasicAuth(username, password)[source]", "property content";
- a settings or parameter reference (DocBook variable lists, man pages' tagged paragraphs): "work_mem (integer)",
  "gc.auto", "HISTSIZE", "CONCURRENTLY", "IF NOT EXISTS".

The description's sentences rarely repeat the name ("Sets the base maximum amount of memory ..."), so
`rag.generation.context_units` quotes them with it ("work_mem: Sets the base maximum ...") and matches the rest of
the description (at most `ENTRY_PARAGRAPHS` paragraphs) with it.

Example:
    >>> name_term("work_mem (integer)"), name_term("Example"), name_term("method"), option_term("--new-file")
    ('work_mem', '', 'method', True)
    >>> api_term("werkzeug.utils.redirect(location, code=302)"), api_term("requests.get(url)")
    ('werkzeug.utils.redirect(location, code=302)', 'requests.get()')
    >>> api_term("truncate(s: str, length: int = 255) → str")   # Sphinx prints the return type after an arrow
    'truncate(s: str, length: int = 255)'
    >>> api_term("jinja-filters.dictsort(value, by='key') → list"), api_term("git-stash(1)")   # a domain's namespace
    ("jinja-filters.dictsort(value, by='key')", '')
"""

from __future__ import annotations

import re

__all__ = ["ENTRY_PARAGRAPHS", "api_term", "name_term", "option_term"]

_TERM = re.compile(r"^--?[A-Za-z][\w-]*(?:[= ]\S+)?$")  # a definition list's term: "-N", "--new-file", "-c <branch>"
# an API reference's entry: "class requests.auth.HTTPBasicAuth(username, password)[source]", "property content"
_API_TERM = re.compile(r"^(?:(?P<kind>class|property|exception|attribute|method|classmethod|staticmethod|function|data)\s+)?"
                       r"(?P<name>[A-Za-z_]\w*(?:-\w+)*\.\w+(?:\.\w+)*|[A-Za-z_]\w*)(?P<call>\(.*\))?"
                       r"(?:\s*(?:→|->)\s*[^\s()].{0,80})?\s*(?:\[source\])?$")   # a return type: "... ) → str"


# a reference entry's term line: a setting or parameter name, with its type ("work_mem (integer)", "gc.auto",
# "HISTSIZE", "CONCURRENTLY", "IF NOT EXISTS", a SQL command's parameter "method"); a capitalised word ("Example",
# "Parameters") is a label, not a term
_NAME_TERM = re.compile(r"^(?P<name>[A-Za-z_][\w.:-]*[A-Za-z0-9_]|[A-Z][A-Z_]+(?: [A-Z][A-Z_]+){1,3})"
                        r"(?P<type> \((?:[\w-]+(?:\s[\w-]+){0,2})\))?$")
# the section names of a manual page (and of documents written like one) in capitals: headings, not terms
_SECTIONS = frozenset("NAME SYNOPSIS DESCRIPTION OPTIONS ARGUMENTS EXAMPLES EXAMPLE NOTES NOTE SEE ALSO BUGS AUTHOR "
                      "AUTHORS FILES ENVIRONMENT EXIT STATUS RETURN VALUE VALUES ERRORS HISTORY COPYRIGHT LICENSE "
                      "DIAGNOSTICS CAVEATS WARNING WARNINGS TIP IMPORTANT CAUTION DANGER TODO USAGE OVERVIEW "
                      "CONFIGURATION REPORTING STANDARDS CONFORMING TO COMPATIBILITY SECURITY".split())
ENTRY_PARAGRAPHS = 3   # paragraphs of an entry's description matched with its term (the first one quotes it)


def name_term(line: str) -> str:
    """The name a reference entry's term line defines ("work_mem" for "work_mem (integer)"), or ""."""
    match = _NAME_TERM.match(line)
    if not match:
        return ""
    name = match.group("name")
    if set(name.split()) <= _SECTIONS:
        return ""   # "NAME", "SEE ALSO", "EXIT STATUS": a manual page's section heading
    named = "_" in name.strip("_") or "." in name or (name.isupper() and len(name) >= 2)
    return name if named or name[:1].islower() else ""


def api_term(line: str) -> str:
    """The name an API reference entry defines, as its description is labelled with ("requests.get()",
    "requests.auth.HTTPBasicAuth", "content"); "" for any other line (a one-word paragraph is not an entry)."""
    match = _API_TERM.match(line)
    if not match or not (match.group("kind") or match.group("call")):   # not a bare name ("gc.auto", "Parameters")
        return ""
    called = match.group("call") and match.group("kind") not in ("class", "exception")
    if called and re.search(r"=\s*(?!None\b)[^,)\s]", match.group("call")) and len(match.group("call")) <= 60:
        # a default worth stating ("code=308"; not only "=None")
        return match.group("name") + match.group("call")
    return match.group("name") + ("()" if called else "")


def option_term(line: str) -> bool:
    """Whether the line is an option list's term ("-N", "--new-file", "-c <branch>")."""
    return bool(_TERM.match(line))
