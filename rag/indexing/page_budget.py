"""`Watchdog`: cut off one step of pure-Python work (a PDF page's table detection) after a budget of seconds.

pdfplumber's table detection (`rag.indexing.tables.find_tables`, the opt-in finder) is not linear
in a page: a page of dense rows can take minutes. It runs in Python (pdfminer.six), so it can be
interrupted between two bytecodes: a watchdog thread raises `PageTimeout` in the working thread
(`PyThreadState_SetAsyncExc`) when a step outlives its budget, and the step's caller reads that
page as text. One watchdog thread serves every step of a file; arming and disarming are under one
lock, the interrupt is sent again every 10 ms until the step ends (one landing in a garbage-collector
callback is swallowed there), and one sent but not yet delivered when the step ended is withdrawn,
so `PageTimeout` never escapes the `with` block of the step it was meant for.

Work in C (a long zlib inflate inside pdfminer) is interrupted when it returns to Python.
`PageTimeout` derives from `BaseException`, so an `except Exception` inside the library does not
swallow it.

Example:
    >>> with Watchdog(0.05) as dog:
    ...     try:
    ...         with dog.step():
    ...             while True:
    ...                 pass
    ...     except PageTimeout:
    ...         print("cut off")
    cut off
"""

from __future__ import annotations

import ctypes
import math
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["PageTimeout", "Watchdog"]

_RESEND = 0.01  # seconds between interrupts once a step is over its budget


class PageTimeout(BaseException):  # noqa: N818 - a signal to the step, not an error of the caller's
    """Raised inside a step that outlived its budget (see the module docstring)."""


def _interrupt(thread_id: int, exc: Any) -> None:
    """Raise `exc` in the thread at its next bytecode (None: withdraw one not delivered yet)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(exc) if exc else None)


class Watchdog:
    """Cuts off steps that take longer than `seconds` (a context manager: its thread stops on exit).

    The state is guarded by a plain `threading.Lock`, whose `with` runs no Python code on entry, so an
    interrupt delivered while a step ends can never leave the lock held.

    Args:
        seconds: the budget of one step, 0 or more (0: every step is cut off at once; `math.inf`: none).
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._deadline: float | None = None
        self._target = 0
        self._fired = False
        self._closed = False
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Watchdog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def step(self) -> Iterator[None]:
        """Run the `with` block within the budget; `PageTimeout` is raised in it when the budget is spent."""
        if math.isinf(self.seconds):
            yield
            return
        if self.seconds <= 0:   # (no budget: cut off before it starts, without waiting for the watchdog thread)
            raise PageTimeout
        if self._thread is None:
            self._thread = threading.Thread(target=self._watch, name="rag-page-watchdog", daemon=True)
            self._thread.start()
        with self._lock:   # (the watchdog fires under this lock: nothing is interrupted before the step is armed)
            self._target, self._fired = threading.get_ident(), False
            self._deadline = time.monotonic() + self.seconds
            self._wake.set()
        try:
            yield
        finally:
            with self._lock:
                self._deadline = None
                if self._fired:   # sent while the block was ending: withdrawn if it was not delivered yet
                    self._fired = False
                    _interrupt(self._target, None)

    def _watch(self) -> None:
        left: float | None = None
        while True:
            self._wake.wait(left)
            self._wake.clear()   # (cleared before the state is read: an arm after this wakes the next wait)
            with self._lock:
                if self._closed:
                    return
                left = None if self._deadline is None else self._deadline - time.monotonic()
                if left is not None and left <= 0:
                    # sent again until the step ends: one that lands in a garbage-collector callback (Python code,
                    # e.g. Hypothesis's) is swallowed there as "unraisable"
                    self._deadline, self._fired, left = time.monotonic() + _RESEND, True, _RESEND
                    _interrupt(self._target, PageTimeout)

    def close(self) -> None:
        """Stop the watchdog thread (no step may run after this)."""
        with self._lock:
            self._closed = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
