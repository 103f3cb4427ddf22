"""Class-level CSV inputs: the roster (id,name,email[,section][,extension_days]) and submission times.

`section` (optional column) is the student's section as the LMS names it
(Canvas's grade import shows it; blank: none).

`extension_days` (optional column) is a student's extra time on every
assignment, in days (fractions allowed: 0.5 is twelve hours), for standing
accommodations; blank means none. One assignment's extension is granted with
`grade extension` instead, and wins over the roster's for that assignment.

Both are read strictly: a bad header, a student id that breaks the rule of
grader/core/student_ids.py or an unreadable time stops the command before
anything is graded, because a silently ignored row would mean a wrong late
penalty or a student missing from the class report.
"""

from __future__ import annotations

import csv
from datetime import datetime
from pathlib import Path

from grader.core.compat import NoTimeZone, parse_zoned
from grader.core.errors import ClassDataError
from grader.core.student_ids import check_student_id

ROSTER_COLUMNS = ("id", "name", "email", "section", "extension_days")
TIMESTAMP_COLUMNS = ("student", "submitted_at")
MAX_EXTENSION_DAYS = 365


def _rows(path: Path, required: tuple[str, ...]) -> list[dict[str, str]]:
    try:
        text = Path(path).read_text(encoding="utf-8-sig")  # spreadsheets often add a BOM
    except (OSError, UnicodeDecodeError) as exc:
        raise ClassDataError(f"cannot read {path}: {exc}") from exc
    reader = csv.DictReader(text.splitlines())
    header = [h.strip().lower() for h in (reader.fieldnames or [])]
    missing = [c for c in required if c not in header]
    if missing:
        raise ClassDataError(f"{path}: missing column(s) {', '.join(missing)} "
                             f"(expected a header line with {', '.join(required)})")
    rows = []
    for raw in reader:
        row = {k.strip().lower(): (v or "").strip() for k, v in raw.items() if k is not None}
        if any(row.values()):
            rows.append(row)
    return rows


def _extension_days(value: str, where: str) -> float | None:
    if not value:
        return None
    try:
        days = float(value)
    except ValueError:
        days = float("nan")
    if not 0 <= days <= MAX_EXTENSION_DAYS:  # NaN fails too
        raise ClassDataError(f"{where}: extension_days must be a number of days from 0 to {MAX_EXTENSION_DAYS} "
                             f"(e.g. 2 or 0.5), not {value!r}")
    return days or None


def read_roster(path: str | Path) -> list[dict]:
    """Rows of `id,name,email` (name and email may be blank), with `section` (text or None) and
    `extension_days` (float or None) when the roster has those columns."""
    rows = []
    seen: set[str] = set()
    parsed = _rows(Path(path), ("id",))
    with_extensions = bool(parsed) and "extension_days" in parsed[0]
    with_sections = bool(parsed) and "section" in parsed[0]
    for number, row in enumerate(parsed, start=2):
        student = row.get("id", "")
        if not student:
            raise ClassDataError(f"{path}, line {number}: empty student id")
        check_student_id(student, f"{path}, line {number}", fix="correct the id in the roster")
        if student in seen:
            raise ClassDataError(f"{path}, line {number}: student {student!r} listed twice")
        seen.add(student)
        entry = {"id": student, "name": row.get("name") or None, "email": row.get("email") or None}
        if with_sections:
            entry["section"] = row.get("section") or None
        if with_extensions:
            entry["extension_days"] = _extension_days(row.get("extension_days") or "", f"{path}, line {number}")
        rows.append(entry)
    return rows


def read_timestamps(path: str | Path) -> dict[str, datetime]:
    """student → submission time (ISO 8601 with a time zone)."""
    times: dict[str, datetime] = {}
    for number, row in enumerate(_rows(Path(path), TIMESTAMP_COLUMNS), start=2):
        student, value = row["student"], row["submitted_at"]
        check_student_id(student, f"{path}, line {number}", fix="use the id the submission is named by")
        try:
            times[student] = parse_zoned(value)
        except NoTimeZone as exc:
            raise ClassDataError(f"{path}, line {number}: {value!r} has no time zone "
                                 f"(write e.g. 2026-12-14T23:59:00+00:00)") from exc
        except ValueError as exc:
            raise ClassDataError(f"{path}, line {number}: not an ISO 8601 date-time: {value!r}") from exc
    return times
