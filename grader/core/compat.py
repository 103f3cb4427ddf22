"""What Python 3.10 lacks and the grader uses (Gradescope's default image runs 3.10).

`tomllib` is the standard library's from 3.11 (the `tomli` backport before);
`UTC` and `StrEnum` likewise; `parse_iso` accepts a trailing "Z", which
`datetime.fromisoformat` understands only from 3.11; `with_deep_stack` runs
a parser or a tree walk where a submission's deep nesting cannot overflow the
C stack (before 3.11 that is a segmentation fault of the grader, not a
RecursionError).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from datetime import datetime, timezone
from enum import Enum

if sys.version_info >= (3, 11):
    from enum import StrEnum

    import tomllib
else:  # pragma: no cover - exercised by the 3.10 run in CI
    import tomli as tomllib

    class StrEnum(str, Enum):
        """A string enum whose str() and format() are its value, as in 3.11."""

        def __str__(self) -> str:
            return str.__str__(self)

        def __format__(self, spec: str) -> str:
            return str.__format__(self, spec)

UTC = timezone.utc


def parse_iso(text: str) -> datetime:
    """datetime.fromisoformat, with a trailing "Z" for UTC on every supported Python."""
    text = text.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    return datetime.fromisoformat(text)


class NoTimeZone(ValueError):
    """A date-time without a time zone: ambiguous, so the grader never guesses one."""


def parse_zoned(text: str) -> datetime:
    """An ISO 8601 date-time with its time zone (the one parser of the dates people give the grader:
    options, timestamps.csv, Gradescope's metadata). ValueError when `text` is no date-time,
    NoTimeZone (a ValueError) when it has no zone; each caller words the message for its reader."""
    parsed = parse_iso(text)
    if parsed.tzinfo is None:
        raise NoTimeZone(text)
    return parsed


DEEP_STACK_BYTES = 1 << 30  # reserved address space, touched only as used


def with_deep_stack(function: Callable, *args):
    """`function(*args)` in a thread with a 1 GiB C stack; its result, or its exception re-raised."""
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["value"] = function(*args)
        except BaseException as exc:  # handed to the caller as it is
            outcome["error"] = exc

    previous = threading.stack_size(DEEP_STACK_BYTES)
    try:
        thread = threading.Thread(target=run, name="deep-stack")
        thread.start()
    finally:
        threading.stack_size(previous)
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


__all__ = ["UTC", "StrEnum", "parse_iso", "tomllib", "with_deep_stack"]
