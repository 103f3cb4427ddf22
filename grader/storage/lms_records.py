"""The gradebook's LMS tables (part of the one writer of storage: grader.storage.gradebook.Gradebook
inherits these methods and runs LMS_SCHEMA as a migration step).

- `lms_users`: an LMS user tied to a roster student (per platform: an LTI issuer, or canvas:<url>).
- `lms_line_items`: the LMS gradebook column of each assignment, created once and found again.
- `lms_passback`: every score sent or tried, with its outcome; the latest `sent` row of a student is
  what the LMS holds, so a score is sent only when the grade that counts differs from it.
- `lti_states`: each OIDC login's state and nonce, used once (a replayed launch finds it used).
- `lms_endpoints`: the AGS line items and NRPS memberships URLs the last launch carried.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime, timedelta

from grader.core.compat import UTC, parse_iso

LMS_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS lms_users (
        platform TEXT NOT NULL,
        lms_user_id TEXT NOT NULL,
        student_id TEXT NOT NULL,
        linked_at TEXT NOT NULL,
        PRIMARY KEY (platform, lms_user_id)
    )""",
    """CREATE TABLE IF NOT EXISTS lms_line_items (
        platform TEXT NOT NULL,
        assignment_id TEXT NOT NULL,
        url TEXT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (platform, assignment_id)
    )""",
    """CREATE TABLE IF NOT EXISTS lms_passback (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        platform TEXT NOT NULL,
        assignment_id TEXT NOT NULL,
        student_id TEXT NOT NULL,
        score REAL NOT NULL,
        maximum REAL NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('sent', 'failed')),
        detail TEXT NOT NULL DEFAULT '',
        at TEXT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS lms_passback_student ON lms_passback (platform, assignment_id, student_id)",
    """CREATE TABLE IF NOT EXISTS lti_states (
        state TEXT PRIMARY KEY,
        nonce TEXT NOT NULL,
        issued_at TEXT NOT NULL,
        expires_at TEXT NOT NULL,
        used_at TEXT
    )""",
    """CREATE TABLE IF NOT EXISTS lms_endpoints (
        platform TEXT NOT NULL,
        name TEXT NOT NULL,
        url TEXT NOT NULL,
        PRIMARY KEY (platform, name)
    )""",
)
LMS_TABLES = ("lms_users", "lms_line_items", "lms_passback", "lti_states", "lms_endpoints")


def _now() -> datetime:
    return datetime.now(UTC)


def _iso(when: datetime) -> str:
    return when.isoformat(timespec="seconds")


@dataclass(frozen=True)
class SentScore:
    score: float
    maximum: float
    at: str


class LmsRecords:
    """The LMS methods of the Gradebook (it supplies `_db` and `_transaction`)."""

    _db: sqlite3.Connection

    def _transaction(self) -> AbstractContextManager[sqlite3.Connection]:  # pragma: no cover - Gradebook's
        raise NotImplementedError

    # ------------------------------------------------------------ LTI launches
    def issue_lti_state(self, state: str, nonce: str, lifetime: timedelta = timedelta(minutes=10)) -> None:
        now = _now()
        with self._transaction() as db:
            db.execute("DELETE FROM lti_states WHERE expires_at < ?", (_iso(now - timedelta(days=1)),))
            db.execute("INSERT INTO lti_states (state, nonce, issued_at, expires_at) VALUES (?, ?, ?, ?)",
                       (state, nonce, _iso(now), _iso(now + lifetime)))

    def use_lti_state(self, state: str, nonce: str) -> str:
        """'' when (state, nonce) was issued, has not expired and was not used (it is used now), else why not."""
        now = _now()
        with self._transaction() as db:
            row = db.execute("SELECT nonce, expires_at, used_at FROM lti_states WHERE state = ?", (state,)).fetchone()
            if row is None:
                return "this launch was not started here (unknown state)"
            if row[2] is not None:
                return "this launch was already used (a replayed launch)"
            if row[0] != nonce:
                return "the launch's nonce is not the one this sign-in was given"
            if parse_iso(row[1]) < now:
                return "the sign-in took too long (its state expired); launch again from the LMS"
            db.execute("UPDATE lti_states SET used_at = ? WHERE state = ?", (_iso(now), state))
        return ""

    # ------------------------------------------------------------ who is who
    def link_lms_user(self, platform: str, lms_user_id: str, student_id: str) -> None:
        with self._transaction() as db:
            db.execute("INSERT INTO lms_users (platform, lms_user_id, student_id, linked_at) VALUES (?, ?, ?, ?) "
                       "ON CONFLICT(platform, lms_user_id) DO UPDATE SET student_id = excluded.student_id",
                       (platform, lms_user_id, student_id, _iso(_now())))

    def lms_users(self, platform: str) -> dict[str, str]:
        """student id → their LMS user id on `platform`."""
        rows = self._db.execute("SELECT student_id, lms_user_id FROM lms_users WHERE platform = ? ORDER BY linked_at",
                                (platform,)).fetchall()
        return dict(rows)

    def unroster(self, student_ids: list[str]) -> None:
        """Take students off the roster (their gradings and extensions stay)."""
        with self._transaction() as db:
            db.executemany("UPDATE students SET rostered_at = NULL WHERE id = ?", [(s,) for s in student_ids])

    # ------------------------------------------------------------ endpoints and line items
    def set_lms_endpoint(self, platform: str, name: str, url: str) -> None:
        with self._transaction() as db:
            db.execute("INSERT INTO lms_endpoints (platform, name, url) VALUES (?, ?, ?) "
                       "ON CONFLICT(platform, name) DO UPDATE SET url = excluded.url", (platform, name, url))

    def lms_endpoint(self, platform: str, name: str) -> str:
        row = self._db.execute("SELECT url FROM lms_endpoints WHERE platform = ? AND name = ?",
                               (platform, name)).fetchone()
        return row[0] if row else ""

    def line_item(self, platform: str, assignment_id: str) -> str:
        row = self._db.execute("SELECT url FROM lms_line_items WHERE platform = ? AND assignment_id = ?",
                               (platform, assignment_id)).fetchone()
        return row[0] if row else ""

    def set_line_item(self, platform: str, assignment_id: str, url: str) -> None:
        with self._transaction() as db:
            db.execute("INSERT INTO lms_line_items (platform, assignment_id, url, created_at) VALUES (?, ?, ?, ?) "
                       "ON CONFLICT(platform, assignment_id) DO UPDATE SET url = excluded.url",
                       (platform, assignment_id, url, _iso(_now())))

    # ------------------------------------------------------------ what was sent
    def record_passback(self, platform: str, assignment_id: str, student_id: str, score: float, maximum: float,
                        status: str, detail: str = "") -> None:
        with self._transaction() as db:
            db.execute("INSERT INTO lms_passback (platform, assignment_id, student_id, score, maximum, status, "
                       "detail, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                       (platform, assignment_id, student_id, score, maximum, status, detail[:500], _iso(_now())))

    def last_sent(self, platform: str, assignment_id: str) -> dict[str, SentScore]:
        """student → the last score the LMS accepted for the assignment."""
        rows = self._db.execute("SELECT student_id, score, maximum, at FROM lms_passback WHERE platform = ? AND "
                                "assignment_id = ? AND status = 'sent' ORDER BY id", (platform, assignment_id))
        return {student: SentScore(score, maximum, at) for student, score, maximum, at in rows}

    def passback_log(self, platform: str, assignment_id: str) -> Iterator[tuple]:
        """Every attempt: (student, score, maximum, status, detail, at), oldest first."""
        yield from self._db.execute("SELECT student_id, score, maximum, status, detail, at FROM lms_passback "
                                    "WHERE platform = ? AND assignment_id = ? ORDER BY id", (platform, assignment_id))
