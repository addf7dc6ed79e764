"""Text utilities shared by lexical search, extractive answers and support scoring.

Tokenisation lowercases, strips punctuation, drops English stop words and stems (Snowball),
unlike `str.split`, which keeps "Revenue," and "revenue" apart.

Example:
    >>> tokenize("What was Apple's revenue in 2022?")
    ['appl', 'revenu', '2022']
    >>> split_sentences("Revenue grew 5%. Costs fell. See note 3.")
    ['Revenue grew 5%.', 'Costs fell.', 'See note 3.']
"""

from __future__ import annotations

import math
import re
import threading
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import lru_cache

from rag.base.errors import InputError

__all__ = ["STOP_WORDS", "check_unicode", "idf_weights", "lexical_overlap", "neutralise_citation_markers",
           "split_sentences", "terminal_safe", "tokenize", "visible_form"]

STOP_WORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had
    has have having he her here hers herself him himself his how i if in into is it its itself just
    me more most my myself no nor not now of off on once only or other our ours ourselves out over own
    same she should so some such than that the their theirs them themselves then there these they
    this those through to too under until up very was we were what when where which while who whom
    why will with would you your yours yourself yourselves s t don shall may might must also per""".split()
)

_WORD = re.compile(r"[^\W_]+(?:[.,'][^\W_]+)*", re.UNICODE)
_TABLE_RULE = re.compile(r"^\|?\s*:?-{3,}")
_BULLET = re.compile(r"^(?:[-*•]|\d{1,3}[.)])\s+")
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9$€£])")
# a piece that ends in a title ("Mr.", "Dr.", "vs.") never ends a sentence; one that ends in an initialism ("U.S.",
# "e.g.") or a reference word ("No.", "Fig.") does not when a bracket or a figure follows ("U.S. (2022: 1.3%)",
# "No. 4"); "in the U.S. The ..." and "No. The ..." do
_TITLE_END = re.compile(r"(?:^|\s)(?:Mr|Mrs|Ms|Dr|Prof|vs)\.$")
_INITIALISM_END = re.compile(r"(?:(?:^|\s|\()(?:[A-Za-z]\.){2,}|(?:^|\s)(?:No|Nos|Fig|Figs|approx)\.)$")


# C0 and C1 controls, DEL, and the Unicode controls that reorder or hide text (bidi overrides, isolates)
_TERMINAL_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


#: the start of a line that would read as a source entry or one of `rag ask`'s source headers (in `visible_form`)
_SOURCE_LINE = re.compile(r"\s*(?:\[\s*\d+\s*(?:,\s*\d+\s*)*\]|Sources(?:\s+cited)?\s*:|Retrieved[,: (])", re.IGNORECASE)
#: characters that show nothing but are not format characters (Cf): fillers, blank patterns, joiners, selectors
_BLANKS = frozenset("\u034f\u115f\u1160\u17b4\u17b5\u180b\u180c\u180d\u180e\u180f\u2800\u3164\uffa0") | frozenset(
    map(chr, range(0xFE00, 0xFE10)))
#: square brackets that read as "[" and "]" and that NFKC leaves alone
_BRACKETS = str.maketrans("\u27e6\u301a\u3010\u3014\u3016\u3018\u2772\u2045", "[[[[[[[[") | str.maketrans(
    "\u27e7\u301b\u3011\u3015\u3017\u3019\u2773\u2046", "]]]]]]]]")


def visible_form(text: str) -> str:
    """What a reader sees of `text`, for checks of what it looks like: invisible characters dropped (Unicode format
    characters, category Cf: zero-width space and joiners, word joiner, BOM, soft hyphen, bidi marks, tags; and
    blank fillers and variation selectors), compatibility forms folded (NFKC: full-width brackets, letters and
    digits), and square brackets that look like "[" / "]" read as them.

    Example:
        >>> visible_form("\u200b\u2060\ufeff\u00ad\uff3b\uff12\uff3d report.pdf")
        '[2] report.pdf'
    """
    kept = "".join(ch for ch in text if ch not in _BLANKS and unicodedata.category(ch) != "Cf")
    return unicodedata.normalize("NFKC", kept).translate(_BRACKETS)


def _guard_lines(text: str) -> str:
    """Every newline that starts a line reading as a source entry or header (in its `visible_form`) escaped."""
    lines = text.split("\n")
    out = [lines[0]]
    for line in lines[1:]:
        out.append(("\\n" if _SOURCE_LINE.match(visible_form(line)) else "\n") + line)   # (linear in the text)
    return "".join(out)


def terminal_safe(text: object, *, newlines: bool = False, json_text: bool = False) -> str:
    r"""`text` with every control character written as a visible escape (``\x1b``, ``\n``, ``\u202e``).

    For anything printed to a terminal that came from a file name or a document: an ANSI or OSC
    escape sequence would recolour, retitle or clear the terminal (or write a link or the
    clipboard), and a newline or carriage return would forge extra lines (a fake source). With
    `newlines`, newlines and tabs are kept (an answer's own paragraphs), except a newline starting a
    line that would read as a source entry (``[2] ...``) or a source header (``Sources:``,
    ``Sources cited:``, ``Retrieved, not used:``), as the line looks (`visible_form`: a zero-width
    space, word joiner, BOM or soft hyphen before the marker, or full-width brackets, change nothing
    a reader sees, so they change nothing here); everything else is escaped.
    With `json_text` (text that `json.dumps` wrote) every escape is ``\uXXXX`` and newlines are
    kept, so the text is still the same JSON.

    Example:
        >>> print(terminal_safe("report\x1b[2J.pdf\n  [2] forged.pdf"))
        report\x1b[2J.pdf\n  [2] forged.pdf
        >>> terminal_safe("line one\nline two\r", newlines=True)
        'line one\nline two\\r'
    """
    text = str(text)
    keep = "\n\t" if newlines or json_text else ""

    def escape(match: re.Match[str]) -> str:
        char = match.group(0)
        if char in keep:
            return char
        if json_text:
            return f"\\u{ord(char):04x}"
        return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(char) or \
            (f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}")

    safe = _TERMINAL_UNSAFE.sub(escape, text)
    return _guard_lines(safe) if newlines and not json_text else safe


#: a bracketed number list, as citations are written: "[2]", "[1, 3]", "[ 2 ]", "[2-4]", "[2; 5]"; full-width too
_MARKER = re.compile(r"[\[\uff3b](\s*[0-9\uff10-\uff19]+(?:\s*[,;\u2013\uff0c-]\s*[0-9\uff10-\uff19]+)*\s*)[\]\uff3d]")
_FENCE = re.compile(r"^\s*(?:```|~~~)", re.MULTILINE)
_INDEXING = re.compile(r"[\w)\]]$")   # "argv[1]", "rows[0][2]", "f(x)[1]": code's indexing, not a citation


def neutralise_citation_markers(text: str) -> str:
    r"""`text` with the citation markers it already holds made inert: "[2]" becomes "[^2]" (a footnote mark, as
    read), so no citation parser (`\[(\d+(, \d+)*)\]`) takes a document's own footnote for the answer's citation
    of its second source. Full-width "［２］" becomes "[^2]" too. Inside fenced code blocks an index right after a
    name or bracket ("argv[1]") is code and left as it is. Idempotent; nothing else changes.

    Example:
        >>> neutralise_citation_markers("Paris is the capital of France.[2] See [1, 3] and ［４］.")
        'Paris is the capital of France.[^2] See [^1, 3] and [^4].'
        >>> neutralise_citation_markers("```\nprint(sys.argv[1])  # [2]\n```")
        '```\nprint(sys.argv[1])  # [^2]\n```'
    """
    if "[" not in text and "\uff3b" not in text:
        return text
    out, start, in_code = [], 0, False
    for fence in _FENCE.finditer(text):
        out.append(_neutralised(text[start:fence.start()], in_code))
        start, in_code = fence.start(), not in_code
    out.append(_neutralised(text[start:], in_code))
    return "".join(out)


def _neutralised(part: str, code: bool) -> str:
    def inert(match: re.Match[str]) -> str:
        if code and _INDEXING.search(part, 0, match.start()) and match.start() > 0:
            return match.group(0)
        return "[^" + unicodedata.normalize("NFKC", match.group(1)) + "]"

    return _MARKER.sub(inert, part)


def check_unicode(text: str, what: str) -> str:
    """`text` if it is valid Unicode (encodable as UTF-8); else an `InputError` naming `what` and the position.

    JSON may carry a lone surrogate (``"\\ud800"``) that no encoder can write back out.

    Example:
        >>> check_unicode("ok", "question")
        'ok'
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(f"{what} is not valid Unicode (a lone surrogate at position {exc.start}); "
                         "send UTF-8 text") from None
    return text


_STEMMERS = threading.local()


def _stemmer():
    """This thread's Snowball stemmer: a stemmer keeps the word it works on in itself, so two threads sharing one
    stem each other's words (a server's concurrent requests raised IndexError inside it)."""
    found = getattr(_STEMMERS, "english", None)
    if found is None:
        import snowballstemmer

        found = _STEMMERS.english = snowballstemmer.stemmer("english")
    return found


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    return _stemmer().stemWord(word)


def _token(word: str, stem: bool, stop_words: bool) -> str:
    """The token of one lowercased word match ("" when it is dropped)."""
    if "'" in word:
        word = word.split("'", 1)[0]
    if word.isalpha() or not any(c.isdigit() for c in word):   # isalpha: the common case, no scan
        word = word.replace(",", "").replace(".", "")
    if not word or (stop_words and word in STOP_WORDS):
        return ""
    return _stem(word) if stem and not word[0].isdigit() else word


#: (stem, stop_words) -> word -> its token: a text repeats its words, so each is worked out once (emptied when it
#: holds `_TOKENS_KEPT`, so a stream of distinct words cannot grow it without bound; a word longer than
#: `_TOKEN_CHARS` is not kept)
_TOKENS: dict[tuple[bool, bool], dict[str, str]] = {}
_TOKENS_KEPT = 1 << 16
_TOKEN_CHARS = 64


def tokenize(text: str, *, stem: bool = True, stop_words: bool = True) -> list[str]:
    """Lowercase word tokens without punctuation; stop words removed and stemmed by default.

    Numbers keep their inner separators ("1,234.5" stays one token); possessive "'s" is dropped.
    """
    settings = (bool(stem), bool(stop_words))
    known = _TOKENS.get(settings)
    if known is None:
        known = _TOKENS.setdefault(settings, {})
    tokens = []
    for word in _WORD.findall(text.lower()):
        token = known.get(word)
        if token is None:
            token = _token(word, *settings)
            if len(word) <= _TOKEN_CHARS:
                if len(known) >= _TOKENS_KEPT:
                    known.clear()
                known[word] = token
        if token:
            tokens.append(token)
    return tokens


def _rejoined(pieces: Iterable[str]) -> list[str]:
    """Pieces split after an abbreviation joined back to the piece that continues the sentence."""
    out: list[str] = []
    for piece in pieces:
        if out and (_TITLE_END.search(out[-1]) or (_INITIALISM_END.search(out[-1]) and piece[0] in "([0123456789$€£")):
            out[-1] = f"{out[-1]} {piece}"
        else:
            out.append(piece)
    return out


def split_sentences(text: str, *, abbreviations: bool = False) -> list[str]:
    """Split text into sentences.

    Lines of a paragraph are joined (PDF text breaks lines anywhere); blank lines, list items and
    table rows start new units; Markdown headings, table rules and fenced code are left out, since
    they are not statements. With `abbreviations`, a title ("Mr.", "vs.") or an initialism followed by
    a bracket or a figure ("U.S. (2022: 1.3%)", "No. 4") does not end a sentence (used to split an
    answer, whose quoted rows start with such names; the answerer's units keep the plain split, on
    which its rules were measured).

    Example:
        >>> split_sentences("# Title\\n\\nFirst line\\ncontinues. Second one.\\n- a bullet point")
        ['First line continues.', 'Second one.', 'a bullet point']
    """
    sentences: list[str] = []
    paragraph: list[str] = []

    def flush() -> None:
        if paragraph:
            block = " ".join(paragraph)
            pieces = [s.strip() for s in _SENTENCE_END.split(block) if s.strip()]
            sentences.extend(_rejoined(pieces) if abbreviations else pieces)
            paragraph.clear()

    in_code = False
    for raw in text.splitlines():
        line = " ".join(raw.split())
        if line.startswith("```"):
            flush()
            in_code = not in_code
            continue
        if in_code:
            continue
        if not line or line.startswith("#") or _TABLE_RULE.match(line):
            flush()
            continue
        if line.startswith("|"):
            flush()
            cells = [c.strip() for c in line.strip("|").split("|") if c.strip()]
            paragraph.append("; ".join(cells))
            flush()
            continue
        bullet = _BULLET.match(line)
        if bullet:
            flush()
            line = line[bullet.end():]
        paragraph.append(line)
    flush()
    return sentences


def idf_weights(token_lists: Iterable[Sequence[str]]) -> dict[str, float]:
    """Smoothed inverse document frequency of each token over the given token lists."""
    lists = list(token_lists)
    df = Counter(tok for toks in lists for tok in set(toks))
    n = len(lists)
    return {tok: math.log(1 + (n - c + 0.5) / (c + 0.5)) for tok, c in df.items()}


def lexical_overlap(query_tokens: Sequence[str], text_tokens: Sequence[str],
                    idf: dict[str, float] | None = None) -> float:
    """IDF-weighted share of the query's distinct tokens found in the text, in [0, 1]."""
    query = set(query_tokens)
    if not query:
        return 0.0
    present = set(text_tokens)
    weight = (lambda t: idf.get(t, 1.0)) if idf else (lambda t: 1.0)
    total = sum(weight(t) for t in query)
    return sum(weight(t) for t in query if t in present) / total if total else 0.0
