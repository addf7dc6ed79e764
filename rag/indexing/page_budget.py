"""`Watchdog`: cut off one step of pure-Python work (a PDF page's table detection) after a budget of seconds.

pdfplumber's table detection (`rag.indexing.tables.find_tables`, the opt-in finder) is not linear
in a page: a page of dense rows can take minutes. It runs in Python (pdfminer.six), so it can be
interrupted between two bytecodes: a watchdog thread raises `PageTimeout` in the working thread
(`PyThreadState_SetAsyncExc`) when a step outlives its budget, and the step's caller reads that
page as text. One watchdog thread serves every step of a file. A step's `with` block holds a lock of its
own (a C lock, released by the `with` statement itself, so no Python code runs between the block's end
and the release); the interrupt is sent only while that lock is held, again every 10 ms until the
block ends (one landing in a garbage-collector callback is swallowed there). An earlier version
disarmed in a generator's `finally`: an interrupt landing in `contextlib`'s exit before the generator
resumed left the step armed, and the next one escaped past the `with` (seen once in CI).

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
from typing import Any

__all__ = ["PageTimeout", "Watchdog"]

_RESEND = 0.01  # seconds between interrupts once a step is over its budget


class PageTimeout(BaseException):  # noqa: N818 - a signal to the step, not an error of the caller's
    """Raised inside a step that outlived its budget (see the module docstring)."""


def _interrupt(thread_id: int) -> None:
    """Raise `PageTimeout` in the thread at its next bytecode."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(PageTimeout))


class Watchdog:
    """Cuts off steps that take longer than `seconds` (a context manager: its thread stops on exit).

    The state is guarded by a plain `threading.Lock` taken by `step` (before the block) and by the
    watchdog thread, never while the block runs.

    Args:
        seconds: the budget of one step, 0 or more (0: every step is cut off at once; `math.inf`: none).
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._deadline: float | None = None
        self._target = 0
        self._inside = threading.Lock()   # the armed block's lock (see `step`)
        self._seen = False                # the watchdog saw that block running
        self._closed = False
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Watchdog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def step(self) -> Any:
        """Arm the budget for the next `with` block; `PageTimeout` is raised in it when the budget is spent.

        Returns the block's context manager: a fresh `threading.Lock`, held while the block runs. Its enter
        and exit are C code, so nothing in Python runs between the end of the block and the lock's release:
        the watchdog interrupts only while the lock is held, and an interrupt sent but not yet delivered when
        the block ends is delivered at the `with` statement's own exit, inside the caller's `try` (the step
        is then reported cut off: it did overrun its budget). Wrap the `with` in `try ... except PageTimeout`.
        """
        inside = threading.Lock()
        if math.isinf(self.seconds):
            return inside
        if self.seconds <= 0:   # (no budget: cut off before it starts, without waiting for the watchdog thread)
            raise PageTimeout
        if self._thread is None:
            self._thread = threading.Thread(target=self._watch, name="rag-page-watchdog", daemon=True)
            self._thread.start()
        with self._lock:
            self._target, self._inside, self._seen = threading.get_ident(), inside, False
            self._deadline = time.monotonic() + self.seconds
            self._wake.set()
        return inside

    def _watch(self) -> None:
        left: float | None = None
        while True:
            self._wake.wait(left)
            self._wake.clear()   # (cleared before the state is read: an arm after this wakes the next wait)
            with self._lock:
                if self._closed:
                    return
                left = None if self._deadline is None else self._deadline - time.monotonic()
                if left is None or left > 0:
                    continue
                if self._inside.locked():   # in the block: sent again until it ends (one that lands in a
                    self._seen = True         # garbage-collector callback is swallowed there as "unraisable")
                    _interrupt(self._target)
                elif self._seen:   # the block ended after an interrupt: nothing more to send
                    self._deadline = left = None
                    continue
                # (not locked and never seen locked: the block has not begun yet, or ended in time: look again)
                self._deadline, left = time.monotonic() + _RESEND, _RESEND

    def close(self) -> None:
        """Stop the watchdog thread (no step may run after this)."""
        with self._lock:
            self._closed = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
