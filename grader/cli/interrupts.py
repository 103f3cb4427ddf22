"""Stopping a command that started processes: SIGTERM handled as Ctrl-C is.

Python ends at once on SIGTERM (its default), skipping every `finally`, so the worker
processes a command started (a grading pool, and their sandboxes) would be left running.
Inside `sigterm_interrupts()`, SIGTERM raises KeyboardInterrupt in the main thread instead,
and the command's own clean-up for Ctrl-C runs.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """While inside, SIGTERM stops the command as Ctrl-C does; the previous handler is put back after."""

    def interrupt(_number, _frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
