"""What kind of answer a question asks for, and whether a context unit has that kind of answer.

The offline answerer (`rag.generation.extractive`) quotes the unit that answers the question, not
the one sharing the most words with it. A question's type says what the answer must hold:

- `identifier`: "Which option / command / function / exception / variable ...": an option
  (`--amend`, `-i`), a call (`loads()`), a command (`git stash`, "the sdiff command"), an
  exception name (`JSONDecodeError`), an environment variable (`SIMPLE_BACKUP_SUFFIX`), a code span;
- `number`: "How many / how much / what is the default / which port / what exit status ...": a number
  or a number word;
- `extension`: "What extension / suffix ...", "Where does it put / store / write ... files": a file
  extension (`.orig`) or a path;
- `reason`: "Why ...", "What drove / caused ...": a cause ("because", "since", "so that", "to avoid");
- `procedure`: "How do I / can I ...": an identifier to use (an option, a command) is likely part
  of the answer (the same check as `identifier`, but the answer may have more than one sentence);
- `open`: anything else ("How do I ...", "What is ...").

An identifier the question itself names is not an answer to it ("Which git clone option ..." is not
answered by "git clone"). `names_in` finds the names a question mentions (a capitalised word inside
the sentence, a word mixing letters and digits, an acronym): a context that mentions none of them
is about something else, so the answerer says "I don't know".

Example:
    >>> question_type("Which option makes diff ignore case?"), question_type("How many lines of context?")
    ('identifier', 'number')
    >>> has_answer_of_type("Use the -i or --ignore-case option.", "identifier", "Which option ignores case?")
    True
    >>> names_in("What port does PostgreSQL use by default?")
    ['PostgreSQL']
"""

from __future__ import annotations

import re

__all__ = ["QUESTION_TYPES", "asks_for_name", "defined_subject", "has_answer_of_type", "identifiers_in", "names_in", "negated",
           "question_type"]

QUESTION_TYPES = ("identifier", "number", "extension", "reason", "procedure", "open")

_IDENTIFIER_NOUNS = (r"options?|flags?|switch(?:es)?|commands?|programs?|functions?|methods?|class(?:es)?|"
                     r"exceptions?|errors?|modules?|(?:environment )?variables?|settings?|keys?|decorators?|"
                     r"tools?|utilit(?:y|ies)|arguments?|parameters?|modes?|subcommands?|calls?|types?|"
                     r"attributes?|propert(?:y|ies)|adapters?|objects?")
_IDENTIFIER_Q = re.compile(rf"\b(?:which|what)\b(?:\s+\S+){{0,3}}?\s+(?:{_IDENTIFIER_NOUNS})\b"
                           rf"|\b(?:which|what)\s+(?:{_IDENTIFIER_NOUNS})\b|\bwhat (?:do|should) i (?:call|use|run)\b",
                           re.IGNORECASE)
# "the default X" asks for a number only when X is a quantity ("the default compression level"; "the default journal
# mode" is DELETE, "the default conflict algorithm" ABORT)
_QUANTITY = r"(?:number|size|width|length|level|limit|count|timeout|port|depth|precision|interval|amount|percentage|rate)"
_NUMBER_Q = re.compile(r"\bhow (?:many|much|long|often|big|large|wide)\b|\bwhat (?:is|was|are|were) the (?:"
                       r"maximum|minimum|number|size|width|length|value|amount|total|percentage|rate)\b|"
                       rf"\b(?:which|what) port\b|\bexit status\b|\bdefault (?:[\w-]+ ){{0,2}}{_QUANTITY}s?\b|"
                       r"\bin (?:columns|bytes|seconds|lines|percent|usd|millions?|billions?)\b", re.IGNORECASE)
_EXTENSION_Q = re.compile(r"\b(?:extension|suffix)\b", re.IGNORECASE)
_WHERE_Q = re.compile(r"^\s*where\b.*\b(?:put|puts|store[sd]?|save[sd]?|write|writes|written|keeps?|kept|files?|"
                      r"director(?:y|ies)|folders?)\b", re.IGNORECASE)   # a file's place: a path or extension
_HOW_TO_Q = re.compile(r"^\s*how (?:do|can|should|would) (?:i|you|we|one)\b", re.IGNORECASE)
_REASON_Q = re.compile(r"^\s*why\b|\bfor what reason\b|^\s*what (?:drove|drives|caused|causes|led to|explains)\b",
                       re.IGNORECASE)

_OPTION = re.compile(r"(?<![\w-])--?[A-Za-z][\w-]*")
_CALL = re.compile(r"\b[A-Za-z_][\w.]*\(\)")
_DOTTED = re.compile(r"\b[a-z_]\w*\.[a-z_]\w*\b")
_CAMEL = re.compile(r"\b[A-Z][a-z]+(?:[A-Z][a-z]*)+\b|\b[A-Z]{2,}[a-z]{2,}(?:[A-Z][a-z]*)*\b")   # HTTPAdapter too
_CONSTANT = re.compile(r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b")
_CODE_SPAN = re.compile(r"`[^`]+`")
# prose naming a parameter or attribute: "using the params keyword argument", "the history property"
_PROSE_NAME = re.compile(r"\bthe ([a-z_][a-z0-9_]*) (?:keyword )?(?:argument|parameter|property|attribute|method|"
                         r"function|class|object|option|flag|setting|field)\b")
_NOT_PROSE_NAMES = frozenset("same following first second third last new other optional required default only above below "
                             "given next previous main keyword positional entire whole original current specific "
                             "corresponding appropriate additional single final".split())
_COMMAND = re.compile(r"\b(?:the\s+)?([a-z][\w-]*\d*)\s+(?:command|program|utility|subcommand)\b|\b[a-z]+\d\b|"
                      r"\b[a-z][\w.-]*\(\d\w*\)|^[a-z][\w.-]+(?= - )")
# "the sdiff command", "diff3", a manual page "git-stash(1)", a manual page's NAME line "git-stash - Stash ..."
_TITLE_NAME = re.compile(r"^\s*`?([A-Za-z_][\w.-]*(?:\(\d\w*\))?)`?\s*(?:$|[—–:]|-\s|\()")   # "json — JSON ..."
_OPTION_NOUNS = re.compile(r"\b(?:options?|flags?|switch(?:es)?|modes?|arguments?|parameters?)\b", re.IGNORECASE)
_COMMAND_NOUNS = re.compile(r"\b(?:commands?|programs?|tools?|utilit(?:y|ies)|subcommands?)\b", re.IGNORECASE)
_NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?\b|\b(?:zero|one|two|three|four|five|six|seven|eight|nine|ten|"
                     r"twelve|hundred|thousand)\b", re.IGNORECASE)
_EXTENSION = re.compile(r"(?<![\w/])\.[A-Za-z~]{1,6}\b|‘\s*~\s*’|'~'|[‘'\"`]\s*[\w-]*\.[A-Za-z~]{1,6}\s*[’'\"`]")
_PATH = re.compile(r"(?<![\w/])(?:~|\.{1,2})?/[\w.-]+(?:/[\w.-]+)*")
_REASON = re.compile(r"\b(?:because|since|so that|in order to|to avoid|to prevent|due to|as a result|the reason)\b",
                     re.IGNORECASE)
# a name of several capitalised words inside a sentence ("Read the Docs", "Visual Studio Code"), not its first word
_PHRASE_NAME = re.compile(r"(?<!^)(?<![.?!]\s)\b[A-Z][a-z]+(?:\s+(?:the\s+|of\s+)?[A-Z][a-z]+)+\b")
# a capitalised word inside the sentence, a word mixing letters and digits, a code name in snake_case (pg_cron)
_NAME = re.compile(r"(?<!^)(?<![.?!]\s)\b[A-Z][\w&]*[A-Za-z0-9]\b|\b[A-Za-z]+\d[\w]*\b|\b\d+[A-Za-z]\w*\b|"
                   r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")
_NOT_NAMES = frozenset({"I", "FY", "Q1", "Q2", "Q3", "Q4", "USD", "EUR", "GAAP", "EPS", "EBITDA", "CEO", "CFO"})


def question_type(question: str) -> str:
    """The kind of answer the question asks for (one of `QUESTION_TYPES`)."""
    if _REASON_Q.search(question):
        return "reason"
    if _IDENTIFIER_Q.search(question):
        return "identifier"
    if _EXTENSION_Q.search(question) or _WHERE_Q.search(question):
        return "extension"
    if _NUMBER_Q.search(question):
        return "number"
    if _HOW_TO_Q.search(question):
        return "procedure"
    return "open"


def identifiers_in(text: str) -> set[str]:
    """The identifiers a text names: options, calls, dotted names, CamelCase and CONSTANT names, code
    spans and commands ("the sdiff command", "git stash", "diff3").

    Example:
        >>> sorted(identifiers_in("The sdiff command merges files; use -o or --output."))
        ['--output', '-o', 'sdiff']
    """
    return _options(text) | _code_names(text) | _commands(text)


def _options(text: str) -> set[str]:
    return {m.group().lower() for m in _OPTION.finditer(text)} | _prose_names(text)


def _code_names(text: str) -> set[str]:
    return {m.group().strip("`").lower() for p in (_CALL, _DOTTED, _CAMEL, _CONSTANT, _CODE_SPAN)
            for m in p.finditer(text)} | _prose_names(text)


def _prose_names(text: str) -> set[str]:
    """Names prose gives a parameter or attribute ("the params keyword argument": params)."""
    return {m.group(1) for m in _PROSE_NAME.finditer(text) if m.group(1) not in _NOT_PROSE_NAMES}


def _commands(text: str) -> set[str]:
    return {_plain(m.group(1) or m.group()) for m in _COMMAND.finditer(text)}


def _plain(name: str) -> str:
    """A command's name as a question writes it: "git-stash(1)" -> "git stash"."""
    return re.sub(r"\(\d\w*\)$", "", name.lower()).replace("-", " ")


def title_name(title: str) -> str:
    """The name a document is about, when its title starts with one: "git-stash(1)", "json — JSON
    encoder and decoder"; "" for a title that is a phrase ("Comparing Three Files").

    Example:
        >>> title_name("git-stash(1)"), title_name("json — JSON encoder and decoder"), title_name("Comparing Files")
        ('git-stash(1)', 'json', '')
    """
    match = _TITLE_NAME.match(title or "")
    return match.group(1) if match else ""


def identifier_kind(question: str) -> str:
    """What an identifier question asks for: an "option", a "command" or a "code" name."""
    if _OPTION_NOUNS.search(question):
        return "option"
    return "command" if _COMMAND_NOUNS.search(question) else "code"


def has_answer_of_type(text: str, qtype: str, question: str = "", title: str = "") -> bool:
    """Whether the unit holds the kind of answer `qtype` asks for (and not only what the question names).

    For a question asking for a command or a code name, the name the unit's document is about
    (`title_name(title)`) counts: every sentence of the git-stash(1) page is about `git stash`.
    """
    if qtype in ("identifier", "procedure"):
        lowered = question.lower()
        named = identifiers_in(question) | {_plain(w) for w in lowered.split()}
        kind = identifier_kind(question) if qtype == "identifier" else "any"
        found = {"option": _options, "command": _commands, "code": _code_names}.get(kind, identifiers_in)(text)
        if kind in ("command", "code") and title_name(title):
            found.add(_plain(title_name(title)))
        return any(f not in named and f not in lowered for f in found)
    if qtype == "number":
        asked = set(_NUMBER.findall(question.lower()))
        return any(n.lower() not in asked for n in _NUMBER.findall(text))
    if qtype == "extension":
        return bool(_EXTENSION.search(text) or _PATH.search(text))
    if qtype == "reason":
        return bool(_REASON.search(text))
    return True


def names_in(question: str) -> list[str]:
    """The names a question mentions: capitalised words inside the sentence, words mixing letters and
    digits (FAT32, 3M), acronyms, code names in snake_case (pg_stat_statements); not fiscal-period words (FY, Q2)
    or the pronoun I."""
    names = []
    for match in _NAME.finditer(question.strip()):
        word = match.group()
        if word in _NOT_NAMES or re.fullmatch(r"(?:FY|Q[1-4])?'?\d+(?:Q[1-4])?", word, re.IGNORECASE) \
                or re.fullmatch(r"\d+(?:st|nd|rd|th|s|m|bn|k|mn)?", word, re.IGNORECASE):
            continue
        names.append(word)
    return list(dict.fromkeys(names))


def _initials(text: str) -> set[str]:
    words = re.findall(r"[A-Za-z]+", text)
    return {"".join(w[0] for w in words[i:i + n]).lower() for n in (2, 3, 4) for i in range(len(words) - n + 1)}


def missing_names(question: str, context_text: str) -> list[str]:
    """The names of the question the context never mentions (as a word, a prefix of a longer word,
    or, for an acronym like JnJ, the initials of consecutive words).

    Example:
        >>> missing_names("What was JnJ's revenue? And Netflix's?", "Johnson & Johnson reported revenue.")
        ['Netflix']
    """
    lowered = context_text.lower()
    squashed = re.sub(r"[^a-z0-9]", "", lowered)
    initials: set[str] | None = None
    missing = []
    for name in names_in(question):
        key = name.lower()
        if key in lowered or re.sub(r"[^a-z0-9]", "", key) in squashed:
            continue
        capitals = "".join(c for c in name if c.isupper())
        if len(capitals) >= 2:
            initials = _initials(context_text) if initials is None else initials
            if capitals.lower() in initials:
                continue
        missing.append(name)
    spaced = " ".join(lowered.split())
    for phrase in _PHRASE_NAME.finditer(question):   # "Read the Docs": the name, not its words anywhere
        words = phrase.group().split()
        joined = " ".join(words).lower()   # written apart or together ("Best Buy", BESTBUY_2024Q2_10Q)
        if not any(w in missing for w in words) and joined not in spaced \
                and re.sub(r"[^a-z0-9]", "", joined) not in squashed:
            missing.append(phrase.group())
    return missing


def _name_words(identifier: str) -> set[str]:
    return {w for w in re.split(r"[^a-z0-9]+", identifier.lower()) if w}


def name_match(text: str, question: str) -> float:
    """How well an identifier of the text spells the question: the best share of an identifier's words
    (``--ignore-all-space``: ignore, all, space) that the question uses, stop words included.

    Example:
        >>> name_match("-w, --ignore-all-space: Ignore white space.", "Which option ignores all white space?")
        1.0
    """
    from rag.base.text import tokenize

    asked = set(tokenize(question, stop_words=False))
    named = {i.replace("git-", "git ") for i in identifiers_in(question)}
    best = 0.0
    for identifier in identifiers_in(text) - named:
        words = {w for w in (tokenize(" ".join(_name_words(identifier)), stop_words=False)) if len(w) > 1}
        if words:
            best = max(best, len(words & asked) / len(words))
    return best


_NEGATION = re.compile(r"(?<![\w-])(?:not|no|never|cannot|none|nothing)(?![\w-])|n[’']t\b", re.IGNORECASE)


def negated(question: str, texts: list[str]) -> list[bool]:
    """Per text: whether it starts by denying (its first five words, after an option label, hold "not",
    "no", "never", ...) while the question asks without a negation: "--soft: Does not touch the index
    or the working tree" is about the index and the working tree, but does not reset them.

    Example:
        >>> negated("Which mode resets the index?", ["--soft: Does not touch the index.", "--mixed: Resets the index."])
        [True, False]
    """
    if _NEGATION.search(question) or re.search(r"\bwithout\b|\bonly\b", question, re.IGNORECASE):
        return [False] * len(texts)
    out = []
    for text in texts:
        label, sep, rest = text.partition(": ")
        words = (rest if sep and len(label.split()) <= 4 else text).split()[:5]
        out.append(bool(_NEGATION.search(" ".join(words))))
    return out


def asks_for_name(question: str, qtype: str) -> bool:
    """Whether the question asks for a command or code name ("Which command ...?"): its words are not that
    name, so a page's title sharing one of them ("shows" and git-show) is a coincidence, not a match."""
    return qtype == "identifier" and identifier_kind(question) in ("command", "code")


_DEFINE_Q = re.compile(r"^\s*(?:how (?:is|are) (?P<a>.+?) (?:defined|computed|calculated|measured)|what does (?P<b>.+?) "
                       r"mean|what is meant by (?P<c>.+?)|define (?P<d>.+?)|what (?:is|are) (?P<e>.+?))\s*[?.!]*\s*$",
                       re.IGNORECASE)


def defined_subject(question: str) -> str:
    """What a question asks to define: "How is citation precision defined?" -> "citation precision" (an
    article dropped, cut before "of": "the support score of a sentence" -> "support score"); "" for any
    other question, and for a "What is ...?" of more than four words (a value, not a term).

    Example:
        >>> defined_subject("How is citation precision defined?"), defined_subject("What is a stash?")
        ('citation precision', 'stash')
    """
    match = _DEFINE_Q.match(question)
    if not match:
        return ""
    subject = next(g for g in match.groups() if g)
    subject = re.sub(r"^(?:the|an?)\s+", "", subject.strip(), flags=re.IGNORECASE)
    subject = re.split(r"\s+(?:of|for|in|when|used)\s+", subject)[0]
    return "" if match.group("e") and len(subject.split()) > 4 else subject
