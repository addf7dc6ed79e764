"""Comparison questions, answered from both sides.

"What is the difference between X and Y?", "How does X compare to Y?", "X vs Y", "Do X and Y use the
same ...?", "Is X faster than Y?", "A in 2023 compared to 2022": a good answer states X's side and Y's
side, each quoted and cited, not two units about one of them. `comparison_sides` finds the two sides
(`None` for any other question; "Which option compares two files?" is not a comparison). The words of
a side that the other side does not share are its keys ("git fetch" / "git pull": `fetch` / `pull`;
"the connect timeout" / "the read timeout": `connect` / `read`).

`compare` answers each side as a question of its own: the question with the other side's keys and the
comparison words taken out ("How did JnJ's US sales growth compare to international sales growth in
FY2022?" is asked as "JnJ's US sales growth sales growth in FY2022?" for the U.S. side), so a side is
answered by a prose sentence or by a table row exactly as a plain question would be. A side's answer
must be about that side: it (or its document's title, section or file name) holds at least half of the
side's key weight (keys weighted by IDF over the context's units), and a unit that starts by naming the other
side ("git-pull - Fetch from ...") is about that one, whatever it says of this side; and it must state something
(not a pointer, "See also report_level.", a list of names or a title: `_says_something`). A side named by code
(an option "-a", "-Q" against "-q", a shell parameter "$*", a snake_case name "before_request") is matched by
that name as written, since its words say nothing ("a") or the same as the other side's ("q"). Of the units
about a side, its own reference entry's first sentence ("-E: Don't use a saved environment ..., but rebuild
it completely.") is preferred to the entry's later ones ("The default is to only read ..."): a comparison
states what each side is. A side with no such unit, or whose best unit is below the refusal threshold, is
said to be missing ("The context does not say about Y.") rather than answered from the other side; both
missing: "I don't know".

Example:
    >>> comparison_sides("What is the difference between git fetch and git pull?")[:4]
    ('git fetch', 'git pull', ('fetch',), ('pull',))
    >>> comparison_sides("What is the difference between the -q and the -Q options?")[:2]
    ('-q', '-Q')
    >>> comparison_sides("Which option compares two files line by line?") is None
    True
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from typing import Any, NamedTuple

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from rag.base.text import tokenize
from rag.generation.context_units import context_units
from rag.generation.line_kinds import SENTENCE_END
from rag.generation.periods import period_word
from rag.generation.value_units import period_term

__all__ = ["Comparison", "Sides", "code_names", "compare", "comparison_sides", "labelled_with", "side_question"]

_END = r"(?=\s*(?:[?.!:;,](?:\s|$)|\s(?:in|on|for|during|as of|at|over|under|by)\s|$))"
_VERB = r"(?:does|do|did|is|are|was|were|has|have|had)"
# (pattern, whether the first side is the open-ended text before the cue: trimmed to the second side's length)
_PATTERNS: tuple[tuple[re.Pattern[str], bool], ...] = (
    (re.compile(rf"\bdiffer(?:ence|ences)?\s+between\s+(?P<a>.+?)\s+and\s+(?P<b>.+?){_END}", re.I), False),
    (re.compile(rf"\bhow\s+{_VERB}\s+(?P<a>.+?)\s+(?:compare|differ|stack up)\s+(?:to|with|from|against)\s+"
                rf"(?P<b>.+?){_END}", re.I), False),
    (re.compile(rf"\b{_VERB}\s+(?P<a>.+?)\s+and\s+(?P<b>.+?)\s+(?:\w+\s+)?(?:the same|differ|different|"
                r"identical|similar|alike)\b", re.I), False),
    (re.compile(rf"\b{_VERB}\s+(?P<a>.+?)\s+(?:\w+\s+)?the same\s+(?:\w+\s+){{0,2}}?as\s+(?P<b>.+?){_END}",
                re.I), False),
    (re.compile(rf"\b{_VERB}\s+(?P<a>.+?)\s+(?:\w+er|more\s+\w+|less\s+\w+|better|worse)\s+than\s+(?P<b>.+?){_END}",
                re.I), False),
    (re.compile(rf"(?P<a>[^,;:?]+?)\s+(?:(?:as\s+)?compared|relative)\s+(?:to|with)\s+(?P<b>.+?){_END}", re.I), True),
    (re.compile(rf"(?P<a>[^,;:?]+?)\s+(?:vs\.?|versus)\s+(?P<b>.+?){_END}", re.I), True),
)
_CUE_WORDS = re.compile(r"(?<![\w-])(?:differences?|different|differ|compared?|comparison|versus|vs\.?|between|same|"
                        r"similar|alike|identical)(?![\w-])", re.I)


class Sides(NamedTuple):
    """The two sides of a comparison as the question words them, each side's own key terms (a dotted
    name's last part is an alternative: "r.text" is `rtext|text`) and where the two sides stand in the question."""

    first: str
    second: str
    first_keys: tuple[str, ...]
    second_keys: tuple[str, ...]
    span: tuple[int, int] = (0, 0)
    first_code: tuple[str, ...] = ()
    second_code: tuple[str, ...] = ()


# a side named by code: an option ("-a", "-Q": case matters), a shell parameter ("$*", "$@") or a snake_case name
# ("before_request"); matched literally, since its words ("a", "q", "request") say nothing or say the same as the other's
_CODE = re.compile(r"(?<![\w$-])(?:--?[A-Za-z][\w-]*|\$[*@#?!$0-9-]|[A-Za-z]\w*_\w+)(?![\w])")


def code_names(side: str) -> tuple[str, ...]:
    """The code names a side is named by ("-E", "$@", "before_request"), in order; () for a side of words.

    Example:
        >>> code_names('"$*"'), code_names("the -E option"), code_names("request_started signal"), code_names("git fetch")
        (('$*',), ('-E',), ('request_started',), ())
    """
    return tuple(dict.fromkeys(m.group() for m in _CODE.finditer(side)))


def _tokens(text: str) -> list[str]:
    return [period_term(t) for t in tokenize(text)]   # "FY2023" is the year 2023 a table prints


def _keys(side: str, other: list[str]) -> tuple[str, ...]:
    last = {tokenize(d)[0]: tokenize(d.rsplit(".", 1)[1]) for d in re.findall(r"\b[A-Za-z_]\w*(?:\.\w+)+", side)
            if tokenize(d) and tokenize(d.rsplit(".", 1)[1])}
    return tuple(dict.fromkeys(f"{period_term(t)}|{last[t][0]}" if t in last else period_term(t) for t in tokenize(side)
                               if period_term(t) not in other))


def comparison_sides(question: str) -> Sides | None:
    """The two sides a comparison question asks about, or None for a question that compares nothing."""
    for pattern, open_first in _PATTERNS:
        match = pattern.search(question)
        if not match:
            continue
        first, second = (re.sub(r"^(?:the|an?)\s+", "", match.group(g).strip(), flags=re.I) for g in "ab")
        if open_first:   # "What does exit status 1 mean for diff compared to diff3": the side is "diff"
            first = " ".join(first.split()[-max(len(second.split()), 1):])
        elif len(second.split()) > len(first.split()):   # "the -b and -w options of diff": "-w"
            second = " ".join(second.split()[:len(first.split())])
        owner = re.match(r"^\S+['’]s\s+", first)   # "JnJ's US sales growth" vs "international sales growth":
        if owner and not re.match(r"^\S+['’]s\s", second):   # the owner is both sides'
            first = first[owner.end():]
        start = match.start("a") + match.group("a").rfind(first)
        end = match.start("b") + match.group("b").find(second) + len(second)
        first_keys, second_keys = _keys(first, _tokens(second)), _keys(second, _tokens(first))
        codes = code_names(first), code_names(second)
        if all(codes) and set(codes[0]) != set(codes[1]):   # "-q" and "-Q": told apart by their code names
            first_keys, second_keys = first_keys or codes[0], second_keys or codes[1]
        else:
            codes = ((), ())
        if not first_keys or not second_keys:
            continue
        if any(all(period_word(k) for key in keys for k in key.split("|")) for keys in (first_keys, second_keys)):
            continue   # one thing in two periods ("in Q2 of FY2023 compared to Q2 of FY2022"): a value question
        return Sides(first, second, first_keys, second_keys, (start, end), *codes)
    return None


def side_question(question: str, sides: Sides, which: int) -> str:
    """The question about one side: the two sides replaced by that side (and the words of the other side that
    are not its own: "international sales growth" leaves "sales growth"), the comparison words taken out.

    Example:
        >>> q = "How does the connect timeout compare to the read timeout?"
        >>> side_question(q, comparison_sides(q), 1)
        'How does the read timeout timeout?'
    """
    own, other = (sides.first, sides.second) if which == 0 else (sides.second, sides.first)
    other_keys = {k for key in (sides.second_keys if which == 0 else sides.first_keys) for k in key.split("|")}
    shared = " ".join(w for w in other.split() if not set(tokenize(w)) & other_keys and not code_names(w))
    start, end = sides.span
    last = " ".join(d.rsplit(".", 1)[1] for d in re.findall(r"\b[A-Za-z_]\w*(?:\.\w+)+", own))   # r.text: text
    text = f"{question[:start]}{own} {last} {shared}{question[end:]}" if end > start else question
    text = _CUE_WORDS.sub(" ", text)
    text = re.sub(r"\b(?:and|to|with|from|as|than|the)\b(?=\s*(?:[?.!,:;]|$|(?:and|to|with|from|as|than|the|in|on|for)\b))",
                  " ", text, flags=re.I)   # connectives left dangling
    return re.sub(r"\s+([?.!,])", r"\1", " ".join(text.split()))


def _weights(docs: Sequence[Document]) -> dict[str, float]:
    """Inverse document frequency of each term over the context's chunks (a term in every chunk: about 0)."""
    import math

    counts: dict[str, int] = {}
    for doc in docs:
        for term in set(_tokens(doc.page_content)) | set(_tokens(doc.page_content.replace(".", " "))):
            counts[term] = counts.get(term, 0) + 1
    n = max(len(docs), 1)
    return {t: math.log((n + 1) / (c + 0.5)) for t, c in counts.items()}


def _options(text: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])--?[A-Za-z][\w-]*", text))


_HEAD = re.compile(r"^(?P<head>\S+(?:,? \S+){0,3}?)(?: - |: )")   # "git-pull - Fetch from ...", "--soft: Does not ..."


def _defines_other(text: str, keys: Sequence[str], other: Sequence[str]) -> bool:
    """A unit that starts by naming the other side ("git-pull - Fetch from and integrate ...") defines that side,
    whatever its description says about this one."""
    match = _HEAD.match(text)
    if not match or not other:
        return False
    head = set(_tokens(match.group("head").replace("-", " ").replace(".", " ")))
    named = lambda ks: any(any(a in head for a in k.split("|")) for k in ks)   # noqa: E731
    return named(other) and not named(keys)


_LABELS = re.compile(r"^(?:[^\s:]+(?:,? [^\s:]+){0,3}: )+")   # "sphinx-build: -E: ", "-N, --new-file: "


_SEE = re.compile(r"^(?:see|also see)\b", re.IGNORECASE)


def _says_something(text: str, keys: Sequence[str]) -> bool:
    """Whether a unit states something beyond the sides' names: not a pointer ("See also report_level."), a list of
    names ("pg_dumpall, pg_restore, psql") or a title naming both ("VIRTUAL versus STORED columns")."""
    labels = _LABELS.match(text)
    body = text[labels.end():] if labels else text
    names = {a for k in keys for a in k.split("|")}
    if re.search(r"\d", body):   # a table row or a value ("U.S. (2022: $48,580)") states its figure
        return True
    return len(body.split()) >= 4 and len(set(_tokens(body)) - names) >= 2 and not _SEE.match(body) \
        and (len(body.split()) > 6 or bool(SENTENCE_END.search(body)))


def _named(text: str, names: Sequence[str]) -> bool:
    return any(re.search(rf"(?<![\w$-]){re.escape(n)}(?![\w-])", text) for n in names)


def labelled_with(text: str, names: Sequence[str]) -> bool:
    """Whether a unit is quoted with an entry label naming one of `names` ("-E: Don't use ...", "sphinx-build: -E: ...")."""
    labels = _LABELS.match(text)
    return bool(labels) and _named(labels.group(), names)


def _tier(text: str, doc: Document | None, side: str, keys: Sequence[str], weights: dict[str, float],
          code: Sequence[str] = ()) -> int:
    """How a unit is about a side: 0 it starts with it (in its first three words: "--soft: Does not touch ...", "The cmp
    command compares ...", "git-fetch - Download ..."), 1 it names it, 2 only its document's title, section or file name does,
    3 not about it ("X is ..." anywhere counts as starting with it). A side naming an option (`-b`) is matched by that option, case and all (`-B` is another);
    otherwise by half of its key weight (IDF over the context's chunks; keys absent from the context not counted)."""
    labels = _LABELS.match(text)
    head = labels.group() if labels else " ".join(text.split(":")[0].split()[:6])   # "sphinx-build: -E: Don't ..."
    if code:   # "$*" is matched as written, and so is "-E" (never "-e")
        return 0 if _named(head, code) else 1 if _named(text, code) else 3
    options = _options(side)
    if options:
        return 0 if _options(head) & options else 1 if _options(text) & options else 3
    present = [alts for alts in (tuple(a for a in k.split("|") if a in weights) for k in keys) if alts]
    if not present:
        return 3
    weight = [max(max(weights[a] for a in alts), 0.05) for alts in present]

    def share(words: set[str]) -> float:
        return sum(w for alts, w in zip(present, weight) if any(a in words for a in alts)) / sum(weight)

    def terms(part: str) -> set[str]:   # "requests.auth.HTTPBasicAuth" is also requests, auth, httpbasicauth
        return set(_tokens(part)) | set(_tokens(part.replace(".", " ")))

    defines = re.search(rf"\b{re.escape(side)}\s+(?:is|are|means|refers to)\b", text, re.I)   # "the read timeout is"
    if defines or share(terms(" ".join(text.replace("-", " ").split()[:3]))) >= 0.5:   # or its first three words
        return 0
    words = terms(text)
    if share(words) >= 0.5:
        return 1
    meta = doc.metadata if doc is not None else {}
    names = " ".join(str(meta.get(k) or "") for k in ("title", "section", "source")).replace("-", " ").replace("_", " ")
    return 2 if share(set(words) | set(tokenize(names))) >= 0.5 else 3


def _best_for_side(answerer: Any, question: str, sides: Sides, which: int, docs: Sequence[Document],
                   weights: dict[str, float], leads: set[tuple[int, str]], near: tuple | None = None) -> tuple | None:
    """(the best unit about the side, its confidence), or None when no unit is about it: among the units
    scoring within `relative_cutoff` of the best one about the side, the one most plainly about it, and
    of those one like `near` (the other side's unit): from the same context document, and a row with the same
    columns ("U.S. (2022: 1.3%, 2.3%)" and "International (2022: (1.9)%, 1.0%)": like is compared with like)."""
    side, keys, code = (sides.first, sides.first_keys, sides.first_code) if which == 0 else \
        (sides.second, sides.second_keys, sides.second_code)
    _, ranked, confidence = answerer._scored(side_question(question, sides, which), docs)
    about = []
    for item, conf in zip(ranked, confidence):
        doc = docs[item.source - 1] if 0 < item.source <= len(docs) else None
        tier = _tier(item.text, doc, side, keys, weights, code)
        if tier < 3 and not _defines_other(item.text, keys, sides.second_keys if which == 0 else sides.first_keys) \
                and _says_something(item.text, (*sides.first_keys, *sides.second_keys)):
            about.append((tier, item, conf))
    if not about:
        return None
    floor = about[0][1].score * answerer.relative_cutoff
    source, shape = (near.source, _shape(near.text)) if near is not None else (0, "")

    def lead(item: Any) -> bool:   # the first sentence of the side's own entry ("-E: Don't use a saved ...")
        labels = _LABELS.match(item.text)
        if not labels or not any(item.source == s and item.text.endswith(t) for s, t in leads):
            return False
        if code:
            return _named(labels.group(), code)
        words = set(_tokens(labels.group().replace("-", " ").replace(".", " ")))
        return all(any(a in words for a in k.split("|")) for k in keys)

    near_best = [a for a in about if a[1].score >= floor] or about[:1]   # a negative best score is above its floor
    # an entry's first sentence says what it is: taken when another sentence of its description scores best
    entries = {a[1].source for a in near_best if a[0] == 0}
    near_best += [a for a in about if a[1].score < floor and a[0] == 0 and a[1].source in entries and lead(a[1])]
    tier, item, conf = min(near_best, key=lambda a: (a[0], not (a[0] == 0 and lead(a[1])), a[1].source != source,
                                                     _shape(a[1].text) != shape))
    return item, conf


def _shape(text: str) -> str:
    """A row's columns without its label and numbers: "(2022: 1.3%, 2.3%)" -> "(: ,)"."""
    return re.sub(r"[\d$€£.,%()\s-]+", " ", text.partition("(")[2]).strip()


class _Remembered(Embeddings):
    """An embedding model that embeds each text once (for the two sides of one comparison)."""

    def __init__(self, inner: Embeddings) -> None:
        self.inner, self.seen = inner, {}

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        new = [t for t in dict.fromkeys(texts) if t not in self.seen]
        self.seen.update(zip(new, self.inner.embed_documents(new) if new else []))
        return [self.seen[t] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)


class Comparison(NamedTuple):
    """What `compare` found: the units quoted (at most one per side), the lower side's confidence, the side
    the context lacks ("" when none; both lacking: nothing chosen)."""

    chosen: tuple
    confidence: float
    missing: str = ""
    reason: str = ""   # why a side is missing (as `Decision.reason`)
    note: str = ""   # what the answer says about it (as `Decision.note`)


def compare(answerer: Any, question: str, sides: Sides, docs: Sequence[Any]) -> Comparison:
    """One unit about each side (each cited), or the side the context lacks. `answerer` is the
    `ExtractiveAnswerer` asking (its `_scored`, `relative_cutoff` and `min_confidence` are used)."""
    docs = [d if isinstance(d, Document) else Document(page_content=str(d)) for d in docs]
    weights = _weights(docs)
    if answerer.embedding is not None:   # the two sides score mostly the same units: each is embedded once
        answerer = copy.copy(answerer)
        answerer._embedding = _Remembered(answerer.embedding)
    leads = {(u.source, u.text) for u in context_units(docs) if u.lead}   # entries' first sentences, for both sides
    first = _best_for_side(answerer, question, sides, 0, docs, weights, leads)
    found = [first, _best_for_side(answerer, question, sides, 1, docs, weights, leads, first[0] if first else None)]
    found = [f if f is not None and f[1] >= answerer.min_confidence else None for f in found]
    if not any(found):
        return Comparison((), 0.0, f"{sides.first} and {sides.second}",
                          f"no unit is about {sides.first} or {sides.second}")
    chosen: list = []
    for f in found:
        if f is not None and all(f[0].text != c.text for c in chosen):
            chosen.append(f[0])
    missing = [name for name, f in zip((sides.first, sides.second), found) if f is None]
    if not missing:
        return Comparison(tuple(chosen), min(f[1] for f in found if f is not None))
    return Comparison(tuple(chosen), min(f[1] for f in found if f is not None), missing[0],
                      f"no unit is about {missing[0]}", f"The context does not say about {missing[0]}.")
