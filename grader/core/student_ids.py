"""Student ids: the one rule every entry point applies.

A student id names a folder (`.grade/reports/<id>/`, `<export>/<id>/results.json`)
and is the gradebook's key, so it must be one safe path component that reads
the same everywhere. The rule:

    1 to 64 ASCII characters from  A-Z a-z 0-9 . _ - @ +
    the first one a letter or a digit

So `alice`, `s01`, `ada.lovelace`, `jo-ann_2`, `ada@example.edu` and `u+1` are
ids; `../x`, `.hidden`, `-rf`, `=HYPERLINK(...)`, `bob smith`, `émile` and the
empty string are not. Nothing is rewritten: an id is accepted as given or
refused with a message that says what to change.
"""

from __future__ import annotations

import re

from grader.core.errors import InvalidStudentId

MAX_LENGTH = 64
RULE = f"1 to {MAX_LENGTH} letters, digits and . _ - @ +, starting with a letter or digit"
_ID = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._@+\-]{{0,{MAX_LENGTH - 1}}}")


def is_student_id(value: object) -> bool:
    """True when `value` follows the student-id rule (see the module docstring)."""
    return isinstance(value, str) and _ID.fullmatch(value) is not None


def _shown(value: object) -> str:
    text = repr(value)  # repr escapes control characters, so the message is one safe line
    return text if len(text) <= 80 else text[:77] + "..."


def check_student_id(value: object, where: str = "", fix: str = "") -> str:
    """`value` itself when it is a valid student id; else InvalidStudentId naming `where` and `fix`."""
    if is_student_id(value):
        return value  # type: ignore[return-value]
    prefix = f"{where}: " if where else ""
    advice = f"; {fix}" if fix else ""
    raise InvalidStudentId(f"{prefix}{_shown(value)} is not a usable student id: ids are used as folder "
                           f"names and gradebook keys, so use {RULE}{advice}")
