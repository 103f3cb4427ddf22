"""The gradebook: a SQLite file, and the only code that writes storage.

Every write is one transaction. A submission is identified by (student,
assignment, sha256 of its files): grading the same files again replaces the
earlier record, never duplicates it. The submitted files themselves are
stored, so nothing a student handed in is ever lost.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from grader.core.errors import GradebookError
from grader.core.records import GradeResult
from grader.core.text import storable
from grader.intake.submission import Submission

SCHEMA = """
CREATE TABLE IF NOT EXISTS students (
    id TEXT PRIMARY KEY,
    name TEXT,
    email TEXT
);
CREATE TABLE IF NOT EXISTS submissions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    student_id TEXT NOT NULL REFERENCES students(id),
    assignment_id TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    form TEXT NOT NULL,
    submitted_at TEXT,
    graded_at TEXT NOT NULL,
    seed INTEGER NOT NULL,
    isolation TEXT NOT NULL,
    total REAL NOT NULL,
    raw REAL NOT NULL,
    late_penalty REAL NOT NULL,
    late_days INTEGER NOT NULL,
    max_points REAL NOT NULL,
    pending_points REAL NOT NULL,
    duration_s REAL NOT NULL,
    result_json TEXT NOT NULL,
    UNIQUE (student_id, assignment_id, sha256)
);
CREATE TABLE IF NOT EXISTS submission_files (
    submission_id INTEGER NOT NULL REFERENCES submissions(id) ON DELETE CASCADE,
    path TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    content BLOB NOT NULL,
    PRIMARY KEY (submission_id, path)
);
CREATE TABLE IF NOT EXISTS task_scores (
    submission_id INTEGER NOT NULL REFERENCES submissions(id) ON DELETE CASCADE,
    task_id TEXT NOT NULL,
    earned REAL NOT NULL,
    points REAL NOT NULL,
    status TEXT NOT NULL,
    PRIMARY KEY (submission_id, task_id)
);
CREATE TABLE IF NOT EXISTS test_results (
    submission_id INTEGER NOT NULL REFERENCES submissions(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    task_id TEXT,
    status TEXT NOT NULL,
    kind TEXT NOT NULL,
    fraction REAL NOT NULL,
    diagnosis_id TEXT,
    message TEXT NOT NULL,
    duration_s REAL NOT NULL,
    PRIMARY KEY (submission_id, name)
);
CREATE TABLE IF NOT EXISTS batch_errors (
    student_id TEXT NOT NULL,
    assignment_id TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    error TEXT NOT NULL,
    recorded_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP,
    PRIMARY KEY (student_id, assignment_id, sha256)
);
"""


@dataclass(frozen=True)
class SubmissionRecord:
    id: int
    student_id: str
    assignment_id: str
    sha256: str
    submitted_at: str | None
    graded_at: str
    total: float
    max_points: float
    late_penalty: float
    result: GradeResult


class Gradebook:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=60)
            self._db.execute("PRAGMA foreign_keys = ON")
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.executescript(SCHEMA)
        except (sqlite3.Error, OSError) as exc:
            raise GradebookError(f"cannot open gradebook {self.path}: {exc}") from exc

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Gradebook:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        try:
            with self._db:
                yield self._db
        except sqlite3.Error as exc:
            raise GradebookError(f"gradebook write failed: {exc}") from exc

    # ----------------------------------------------------------------- writes
    def upsert_student(self, student_id: str, name: str | None = None,
                       email: str | None = None) -> None:
        with self._transaction() as db:
            db.execute("INSERT INTO students (id, name, email) VALUES (?, ?, ?) "
                       "ON CONFLICT(id) DO UPDATE SET name = COALESCE(excluded.name, name), "
                       "email = COALESCE(excluded.email, email)", (student_id, name, email))

    def import_roster(self, rows: list[dict]) -> int:
        with self._transaction() as db:
            for row in rows:
                db.execute("INSERT INTO students (id, name, email) VALUES (?, ?, ?) "
                           "ON CONFLICT(id) DO UPDATE SET name = excluded.name, "
                           "email = excluded.email", (row["id"], row.get("name"), row.get("email")))
        return len(rows)

    def record(self, result: GradeResult, submission: Submission) -> int:
        """Store one graded submission (replacing a regrade of the same files)."""
        score = result.score
        with self._transaction() as db:
            db.execute("INSERT INTO students (id) VALUES (?) ON CONFLICT(id) DO NOTHING",
                       (result.student,))
            db.execute("DELETE FROM submissions WHERE student_id = ? AND assignment_id = ? "
                       "AND sha256 = ?", (result.student, result.assignment_id, result.submission_sha256))
            db.execute("DELETE FROM batch_errors WHERE student_id = ? AND assignment_id = ? "
                       "AND sha256 = ?", (result.student, result.assignment_id, result.submission_sha256))
            cursor = db.execute(
                "INSERT INTO submissions (student_id, assignment_id, sha256, form, submitted_at, "
                "graded_at, seed, isolation, total, raw, late_penalty, late_days, max_points, "
                "pending_points, duration_s, result_json) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (result.student, result.assignment_id, result.submission_sha256,
                 result.submission_form, result.submitted_at, result.graded_at, result.seed,
                 result.isolation_level, score.total, score.raw, score.late_penalty,
                 score.late_days, score.max_points, score.pending_points, result.duration_s,
                 json.dumps(result.to_dict())))
            submission_id = cursor.lastrowid
            hashes = submission.file_hashes
            db.executemany("INSERT INTO submission_files VALUES (?, ?, ?, ?)",
                           [(submission_id, name, hashes[name], data)
                            for name, data in submission.files.items()])
            db.executemany("INSERT INTO task_scores VALUES (?, ?, ?, ?, ?)",
                           [(submission_id, t.task_id, t.earned, t.points, t.status)
                            for t in score.tasks])
            db.executemany(
                "INSERT OR REPLACE INTO test_results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(submission_id, o.name, o.task, o.status, o.kind, o.fraction,
                  (o.diagnosis or {}).get("id"), storable(o.message), o.duration_s)
                 for o in result.outcomes])
        return submission_id

    def record_error(self, student_id: str, assignment_id: str, sha256: str, error: str) -> None:
        """A submission the grader could not grade (kept so nothing is silently lost)."""
        with self._transaction() as db:
            db.execute("INSERT INTO students (id) VALUES (?) ON CONFLICT(id) DO NOTHING",
                       (student_id,))
            db.execute("INSERT OR REPLACE INTO batch_errors (student_id, assignment_id, sha256, "
                       "error) VALUES (?, ?, ?, ?)", (student_id, assignment_id, sha256, error))

    # ------------------------------------------------------------------ reads
    def _records(self, where: str, params: tuple) -> list[SubmissionRecord]:
        rows = self._db.execute(
            "SELECT id, student_id, assignment_id, sha256, submitted_at, graded_at, total, "
            f"max_points, late_penalty, result_json FROM submissions WHERE {where} "
            "ORDER BY student_id, COALESCE(submitted_at, graded_at), id", params).fetchall()
        return [SubmissionRecord(*row[:9], GradeResult.from_dict(json.loads(row[9])))
                for row in rows]

    def submissions(self, assignment_id: str, student_id: str | None = None) -> list[SubmissionRecord]:
        if student_id is None:
            return self._records("assignment_id = ?", (assignment_id,))
        return self._records("assignment_id = ? AND student_id = ?", (assignment_id, student_id))

    def latest(self, assignment_id: str) -> dict[str, SubmissionRecord]:
        """Each student's latest graded submission of an assignment."""
        latest: dict[str, SubmissionRecord] = {}
        for record in self.submissions(assignment_id):
            latest[record.student_id] = record  # ordered by time: the last one wins
        return latest

    def has(self, student_id: str, assignment_id: str, sha256: str) -> bool:
        row = self._db.execute("SELECT 1 FROM submissions WHERE student_id = ? AND "
                               "assignment_id = ? AND sha256 = ?",
                               (student_id, assignment_id, sha256)).fetchone()
        return row is not None

    def files(self, submission_id: int) -> dict[str, bytes]:
        rows = self._db.execute("SELECT path, content FROM submission_files WHERE "
                                "submission_id = ?", (submission_id,)).fetchall()
        return {path: bytes(content) for path, content in rows}

    def students(self) -> list[dict]:
        rows = self._db.execute("SELECT id, name, email FROM students ORDER BY id").fetchall()
        return [{"id": r[0], "name": r[1], "email": r[2]} for r in rows]

    def errors(self, assignment_id: str) -> list[dict]:
        rows = self._db.execute("SELECT student_id, sha256, error, recorded_at FROM batch_errors "
                                "WHERE assignment_id = ? ORDER BY student_id",
                                (assignment_id,)).fetchall()
        return [{"student": r[0], "sha256": r[1], "error": r[2], "recorded_at": r[3]} for r in rows]

    def count(self, table: str) -> int:
        if table not in ("students", "submissions", "submission_files", "task_scores",
                         "test_results", "batch_errors"):
            raise ValueError(table)
        return self._db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
