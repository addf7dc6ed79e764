"""Tokenising from many threads at once (a server's concurrent requests) gives each thread its own stems.

A Snowball stemmer keeps the word it works on in itself; one shared by threads raised IndexError inside it
(a concurrent `/invoke` answered 500 in CI), or could stem one thread's word into another's."""

from __future__ import annotations

import threading

from rag.base import text


def test_stemming_in_many_threads_at_once_gives_what_one_thread_gives():
    words = [f"{w}{i}ing" for i in range(3000) for w in ("running", "stemmed", "generalizations", "happily")]
    expected = {w: text._stemmer().stemWord(w) for w in words}
    text._stem.cache_clear()   # (each word stemmed again, concurrently)
    found: dict[str, str] = {}
    errors: list[BaseException] = []

    def work(part: list[str]) -> None:
        try:
            for word in part:
                found[word] = text._stem(word)
        except BaseException as exc:   # (what a shared stemmer raised)
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(words[i::4],)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and found == expected
