"""`tokenize` works each distinct word out once (a word's token is kept): the tokens are those of the word-by-word
rules, for any text, every setting, from many threads at once, and after the kept tokens are emptied."""

from __future__ import annotations

import threading

from hypothesis import given, settings
from hypothesis import strategies as st

from rag.base import text


def _word_by_word(value: str, stem: bool, stop_words: bool) -> list[str]:
    """The rules, applied to each word as it comes (what `tokenize` did before it kept tokens)."""
    tokens = []
    for match in text._WORD.finditer(value.lower()):
        word = match.group()
        if "'" in word:
            word = word.split("'", 1)[0]
        if word.isalpha() or not any(c.isdigit() for c in word):
            word = word.replace(",", "").replace(".", "")
        if not word or (stop_words and word in text.STOP_WORDS):
            continue
        tokens.append(text._stemmer().stemWord(word) if stem and not word[0].isdigit() else word)
    return tokens


_texts = st.lists(st.one_of(st.text(alphabet=list("aBe1,.'’_ -éßİ9xZ\n"), max_size=8),
                            st.sampled_from(["the ", "Running ", "1,234.5", "it's ", "U.S. ", "ﬁnal "]),
                            st.text(max_size=4)),
                  max_size=12).map("".join)


@settings(max_examples=300, deadline=None)
@given(value=_texts, stem=st.booleans(), stop_words=st.booleans())
def test_tokens_are_the_word_by_word_rules(value, stem, stop_words):
    assert text.tokenize(value, stem=stem, stop_words=stop_words) == _word_by_word(value, stem, stop_words)


def test_the_kept_tokens_are_bounded_and_emptying_them_changes_no_token(monkeypatch):
    monkeypatch.setattr(text, "_TOKENS_KEPT", 50)
    monkeypatch.setattr(text, "_TOKENS", {})
    words = " ".join(f"running{i} stemmed{i} The x{i} {'long' * 20}{i}" for i in range(200))
    first = text.tokenize(words)
    kept = text._TOKENS[True, True]
    assert 0 < len(kept) <= 50 and not any(len(word) > text._TOKEN_CHARS for word in kept)
    assert text.tokenize(words) == first == _word_by_word(words, True, True)


def test_many_threads_at_once_get_the_tokens_one_thread_gets():
    texts = [" ".join(f"{w}{i}ing" for w in ("running", "generalizations", "happily", "the")) for i in range(2000)]
    text._TOKENS.clear()
    expected = [_word_by_word(t, True, True) for t in texts]
    found: list[list[str] | None] = [None] * len(texts)
    errors: list[BaseException] = []

    def work(start: int) -> None:
        try:
            for n in range(start, len(texts), 4):
                found[n] = text.tokenize(texts[n])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and found == expected
