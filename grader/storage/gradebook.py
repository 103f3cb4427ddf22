"""The gradebook: a SQLite file, and the only code that writes storage.

Every write is one transaction. A submission is identified by (student,
assignment, sha256 of its files); its current grading lives in `submissions`
(with its task scores and test results), and grading the same files again
moves the earlier grading into `grading_history` before the new one replaces
it, so every result ever recorded is kept and the latest counts. The
submitted files themselves are stored, so nothing a student handed in is
ever lost. Each grading carries the fingerprint of what graded it
(grader.core.fingerprint), which is how `grade batch` notices stale grades.

Staff decisions are audited rows, never edits of a grade: `overrides` (who,
when, why, the total before and after; kept when cleared, and applied to
whatever grading is the latest, so they survive regrades) and `extensions`
(per assignment, or for every assignment from the roster's `extension_days`
column). Scoring applies both when a grade is read (scoring.final_score).

The roster is the students table's rows imported from a roster file
(`rostered_at` set); a student recorded only by a grading or an error is
known but not on it, so reports and exports can keep to the class list.

Jobs (`grade serve`) are rows too: one per upload of a student's files for an
assignment (the files' digest is its key, so the same upload twice is one job)
and tier (cpu: the grade; gpu: kernel timing), with a state (queued, running,
done, failed; a GPU timing still queued when a newer one of the student's
arrives is superseded: the latest wins), a lease and a heartbeat written by the server that grants them,
and an attempt count. A job's grading is recorded and the job marked done in
one transaction, so a job granted again after its worker died is recorded once.

Schema versions (`PRAGMA user_version`): 0 is the first gradebook (no
history, no fingerprints, no staff tables); 1 adds them; 2 marks who is on
the roster (and their section); 3 says why a submission was not graded (a
hand-in problem or a grader error; an earlier row counts as a grader error);
4 adds the server's jobs; 5 the LMS tables (grader/storage/lms_records.py).
An older file is migrated in place, in one transaction, when it is opened: its rows are kept as they were, gradings
without a fingerprint are treated as stale, and a student with a name, an
email or a roster extension counts as on the roster (version 1 kept no
other trace of the roster). A file written by a newer grader is refused
rather than guessed at.
"""
# One module because the gradebook is the one writer of storage: every table's SQL sits beside the
# schema and its migrations, behind one class's transactions.

from __future__ import annotations

import getpass
import json
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from grader.core.compat import UTC, parse_iso
from grader.core.due import DueDate
from grader.core.errors import GradebookError
from grader.core.manifest import Manifest
from grader.core.records import GRADER_ERROR, GradeResult, Override
from grader.core.text import storable
from grader.intake.submission import Submission
from grader.storage.lms_records import LMS_SCHEMA, LMS_TABLES, LmsRecords

SCHEMA_VERSION = 5
EVERY_ASSIGNMENT = ""  # the assignment id of an extension that applies to all (from the roster)
LATER_SUBMISSION = "a later submission counts"  # why an earlier submission's grading is not current
STAFF_ENV = "GRADE_STAFF"  # who is recorded as the author of an override or extension

BASE_SCHEMA = (  # version 0, as the first gradebooks were written
    """CREATE TABLE IF NOT EXISTS students (
        id TEXT PRIMARY KEY,
        name TEXT,
        email TEXT
    )""",
    """CREATE TABLE IF NOT EXISTS submissions (
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
    )""",
    """CREATE TABLE IF NOT EXISTS submission_files (
        submission_id INTEGER NOT NULL REFERENCES submissions(id) ON DELETE CASCADE,
        path TEXT NOT NULL,
        sha256 TEXT NOT NULL,
        content BLOB NOT NULL,
        PRIMARY KEY (submission_id, path)
    )""",
    """CREATE TABLE IF NOT EXISTS task_scores (
        submission_id INTEGER NOT NULL REFERENCES submissions(id) ON DELETE CASCADE,
        task_id TEXT NOT NULL,
        earned REAL NOT NULL,
        points REAL NOT NULL,
        status TEXT NOT NULL,
        PRIMARY KEY (submission_id, task_id)
    )""",
    """CREATE TABLE IF NOT EXISTS test_results (
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
    )""",
    """CREATE TABLE IF NOT EXISTS batch_errors (
        student_id TEXT NOT NULL,
        assignment_id TEXT NOT NULL,
        sha256 TEXT NOT NULL,
        error TEXT NOT NULL,
        recorded_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP,
        PRIMARY KEY (student_id, assignment_id, sha256)
    )""",
)

VERSION_1 = (  # history, fingerprints, staff overrides and extensions
    "ALTER TABLE submissions ADD COLUMN fingerprint TEXT",  # NULL: graded before fingerprints were kept
    "ALTER TABLE submissions ADD COLUMN received_at TEXT",  # when these files were first graded
    "UPDATE submissions SET received_at = graded_at WHERE received_at IS NULL",
    """CREATE TABLE IF NOT EXISTS grading_history (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        student_id TEXT NOT NULL,
        assignment_id TEXT NOT NULL,
        sha256 TEXT NOT NULL,
        submitted_at TEXT,
        graded_at TEXT NOT NULL,
        total REAL NOT NULL,
        max_points REAL NOT NULL,
        fingerprint TEXT,
        result_json TEXT NOT NULL,
        replaced_at TEXT NOT NULL,
        replaced_because TEXT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS grading_history_student ON grading_history (assignment_id, student_id)",
    """CREATE TABLE IF NOT EXISTS overrides (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        student_id TEXT NOT NULL,
        assignment_id TEXT NOT NULL,
        task_id TEXT,
        points REAL NOT NULL,
        reason TEXT NOT NULL,
        author TEXT NOT NULL,
        created_at TEXT NOT NULL,
        sha256 TEXT NOT NULL,
        total_before REAL NOT NULL,
        total_after REAL NOT NULL,
        cleared_at TEXT,
        cleared_by TEXT,
        cleared_reason TEXT
    )""",
    """CREATE TABLE IF NOT EXISTS extensions (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        student_id TEXT NOT NULL,
        assignment_id TEXT NOT NULL,
        extra_s REAL,
        until TEXT,
        reason TEXT NOT NULL,
        author TEXT NOT NULL,
        granted_at TEXT NOT NULL,
        cleared_at TEXT,
        cleared_by TEXT,
        cleared_reason TEXT,
        CHECK ((extra_s IS NULL) <> (until IS NULL))
    )""",
)
VERSION_2 = (  # who is on the roster, and in which section
    "ALTER TABLE students ADD COLUMN section TEXT",
    "ALTER TABLE students ADD COLUMN rostered_at TEXT",  # NULL: known from a grading or an error alone
    "UPDATE students SET rostered_at = strftime('%Y-%m-%dT%H:%M:%S+00:00', 'now') WHERE name IS NOT NULL OR "
    "email IS NOT NULL OR id IN (SELECT student_id FROM extensions WHERE assignment_id = '')",
)
VERSION_3 = (  # why a submission was not graded: its hand-in, or the grader (NULL: recorded before kinds)
    "ALTER TABLE batch_errors ADD COLUMN kind TEXT",
)
VERSION_4 = (  # the server's jobs (grade serve)
    """CREATE TABLE IF NOT EXISTS jobs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        student_id TEXT NOT NULL,
        assignment_id TEXT NOT NULL,
        sha256 TEXT NOT NULL,
        tier TEXT NOT NULL,
        state TEXT NOT NULL,
        upload_name TEXT NOT NULL,
        upload BLOB NOT NULL,
        submitted_at TEXT NOT NULL,
        reason TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        recorded INTEGER NOT NULL DEFAULT 0,
        lease_until REAL,
        heartbeat_at REAL,
        started_at REAL,
        finished_at REAL,
        error TEXT,
        UNIQUE (student_id, assignment_id, sha256, tier),
        CHECK (state IN ('queued', 'running', 'done', 'failed', 'superseded')),
        CHECK (tier IN ('cpu', 'gpu'))
    )""",
    "CREATE INDEX IF NOT EXISTS jobs_queue ON jobs (tier, state, id)",
    "CREATE INDEX IF NOT EXISTS jobs_student ON jobs (assignment_id, student_id)",
)
MIGRATIONS = {1: VERSION_1, 2: VERSION_2, 3: VERSION_3, 4: VERSION_4, 5: LMS_SCHEMA}  # to version N from N - 1
TABLES = ("students", "submissions", "submission_files", "task_scores", "test_results", "batch_errors",
          "grading_history", "overrides", "extensions", "jobs", *LMS_TABLES)
JOB_STATES = ("queued", "running", "done", "failed", "superseded")
JOB_TIERS = ("cpu", "gpu")


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def default_author() -> str:
    """Who an override or extension is recorded as made by: $GRADE_STAFF, else the login name."""
    name = os.environ.get(STAFF_ENV, "").strip()
    if name:
        return name
    try:
        return getpass.getuser()
    except (OSError, KeyError, ImportError):
        return "unknown"


@dataclass(frozen=True)
class RosterEntry:
    """One student of the roster (grade roster import)."""

    id: str
    name: str | None
    email: str | None
    section: str | None
    rostered_at: str  # when a roster last listed them


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
    fingerprint: str | None = None  # None: graded before fingerprints were kept


@dataclass(frozen=True)
class Grading:
    """One grading of one submission: the current one, or an earlier one it replaced."""

    student_id: str
    sha256: str
    graded_at: str
    total: float
    max_points: float
    fingerprint: str | None
    current: bool  # the grading that counts: the latest submission's current grading (one per student)
    replaced_at: str | None = None
    replaced_because: str | None = None


@dataclass(frozen=True)
class OverrideRecord:
    """An audited override: what staff set, on which files, and the total before and after."""

    id: int
    student_id: str
    assignment_id: str
    task_id: str | None  # None: the assignment's total
    points: float
    reason: str
    author: str
    created_at: str
    sha256: str  # the files whose grading was the latest when it was set
    total_before: float
    total_after: float
    cleared_at: str | None = None
    cleared_by: str | None = None
    cleared_reason: str | None = None

    @property
    def active(self) -> bool:
        return self.cleared_at is None

    def as_override(self) -> Override:
        return Override(task=self.task_id, points=self.points, reason=self.reason, author=self.author,
                        created_at=self.created_at)


@dataclass(frozen=True)
class ExtensionRecord:
    """Extra time for one student: `extra_s` seconds past the deadline, or a deadline of their own."""

    id: int
    student_id: str
    assignment_id: str  # EVERY_ASSIGNMENT for the roster's course-wide extension
    extra_s: float | None
    until: str | None
    reason: str
    author: str
    granted_at: str
    cleared_at: str | None = None

    def applied_to(self, due: DueDate) -> DueDate:
        """`due` with this extension: a deadline of the student's own, or extra time."""
        source = "the roster" if self.assignment_id == EVERY_ASSIGNMENT else "an extension"
        if self.until is not None:
            return due.with_extension(until=parse_iso(self.until), source=source)
        return due.with_extension(extra=timedelta(seconds=self.extra_s or 0.0), source=source)

    def describe(self) -> str:
        if self.until is not None:
            return f"until {self.until}"
        hours = (self.extra_s or 0.0) / 3600
        return f"{hours / 24:g} day(s) more" if hours % 24 == 0 else f"{hours:g} hour(s) more"


def due_with(manifest: Manifest, extension: ExtensionRecord | None) -> DueDate:
    """A student's due date: the manifest's, with their extension applied (the one place that does)."""
    due = manifest.due_date
    return extension.applied_to(due) if extension else due



@dataclass(frozen=True)
class JobRecord:
    """One job of the server (its upload's bytes are read only when it is granted: `Gradebook.grant_job`)."""

    id: int
    student_id: str
    assignment_id: str
    sha256: str
    tier: str  # cpu | gpu
    state: str  # queued | running | done | failed
    upload_name: str  # the uploaded file's name (a folder of files: "files.zip", zipped by the server)
    submitted_at: str  # ISO 8601, when the upload arrived (the late policy's time)
    reason: str  # why it is queued: uploaded, regraded by staff, timing...
    attempts: int  # times it was granted to a worker
    recorded: int  # gradings recorded from it (1 once done)
    lease_until: float | None  # epoch seconds: a running job whose lease passed is granted again
    heartbeat_at: float | None
    started_at: float | None
    finished_at: float | None
    error: str | None


_JOB_COLUMNS = ("id, student_id, assignment_id, sha256, tier, state, upload_name, submitted_at, reason, attempts, "
                "recorded, lease_until, heartbeat_at, started_at, finished_at, error")
_SUBMISSION_COLUMNS = ("id, student_id, assignment_id, sha256, submitted_at, graded_at, total, max_points, "
                       "late_penalty, result_json, fingerprint")
_OVERRIDE_COLUMNS = ("id, student_id, assignment_id, task_id, points, reason, author, created_at, sha256, "
                     "total_before, total_after, cleared_at, cleared_by, cleared_reason")
_EXTENSION_COLUMNS = "id, student_id, assignment_id, extra_s, until, reason, author, granted_at, cleared_at"


class Gradebook(LmsRecords):
    def __init__(self, path: str | Path, *, threads: bool = False):
        """Open (and migrate) the gradebook at `path`; `threads`: used from several threads of this process,
        which the caller serialises (the server holds a lock around every call)."""
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=60, isolation_level=None,  # transactions are explicit
                                       check_same_thread=not threads)
            self._db.execute("PRAGMA foreign_keys = ON")
            self._db.execute("PRAGMA journal_mode = WAL")
            self._migrate()
        except (sqlite3.Error, OSError) as exc:
            raise GradebookError(f"cannot open gradebook {self.path}: {exc}") from exc

    def _migrate(self) -> None:
        """Bring the file to SCHEMA_VERSION in one transaction (a fresh file passes through every step)."""
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version == SCHEMA_VERSION:
            return
        if version > SCHEMA_VERSION:
            raise GradebookError(f"{self.path} was written by a newer grader (gradebook version {version}, this "
                                 f"grader knows up to {SCHEMA_VERSION}); upgrade the grader to open it")
        self._db.execute("BEGIN IMMEDIATE")  # one migrating process at a time; the others wait, then re-read
        try:
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            if version < SCHEMA_VERSION:
                for statement in BASE_SCHEMA:
                    self._db.execute(statement)
                for target in range(version + 1, SCHEMA_VERSION + 1):
                    for statement in MIGRATIONS[target]:
                        self._db.execute(statement)
                self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    @property
    def version(self) -> int:
        return self._db.execute("PRAGMA user_version").fetchone()[0]

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Gradebook:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        try:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            raise GradebookError(f"gradebook write failed: {exc}") from exc

    # ----------------------------------------------------------------- writes
    def import_roster(self, rows: list[dict], author: str | None = None) -> int:
        """Add or update students. A row with an `extension_days` key sets (a number) or clears (None)
        the student's extension for every assignment; rows without the key leave it as it is."""
        author = author or default_author()
        when = now_iso()
        with self._transaction() as db:
            for row in rows:
                db.execute("INSERT INTO students (id, name, email, section, rostered_at) VALUES (?, ?, ?, ?, ?) "
                           "ON CONFLICT(id) DO UPDATE SET name = excluded.name, email = excluded.email, "
                           "rostered_at = excluded.rostered_at"
                           + (", section = excluded.section" if "section" in row else ""),
                           (row["id"], row.get("name"), row.get("email"), row.get("section"), when))
                if "extension_days" not in row:
                    continue
                days = row["extension_days"]
                current = self._active_extension(db, row["id"], EVERY_ASSIGNMENT)
                if days is None or days == 0:
                    self._clear_extensions(db, row["id"], EVERY_ASSIGNMENT, author, "not in the roster any more")
                elif current is None or current.until is not None or current.extra_s != days * 86400:
                    self._clear_extensions(db, row["id"], EVERY_ASSIGNMENT, author, "replaced by the roster")
                    db.execute("INSERT INTO extensions (student_id, assignment_id, extra_s, until, reason, author, "
                               "granted_at) VALUES (?, ?, ?, NULL, ?, ?, ?)",
                               (row["id"], EVERY_ASSIGNMENT, days * 86400.0, "roster extension_days", author,
                                now_iso()))
        return len(rows)

    def record(self, result: GradeResult, submission: Submission, replaced_because: str = "graded again") -> int:
        """Store one graded submission. A grading of the same files already there moves to the history
        (with `replaced_because`) and this one replaces it as the one that counts."""
        with self._transaction() as db:
            return self._record(db, result, submission, replaced_because)

    @staticmethod
    def _record(db: sqlite3.Connection, result: GradeResult, submission: Submission, replaced_because: str) -> int:
        score = result.score
        when = now_iso()
        db.execute("INSERT INTO students (id) VALUES (?) ON CONFLICT(id) DO NOTHING",
                   (result.student,))
        key = (result.student, result.assignment_id, result.submission_sha256)
        earlier = db.execute("SELECT id, received_at FROM submissions WHERE student_id = ? AND "
                             "assignment_id = ? AND sha256 = ?", key).fetchone()
        received_at = result.graded_at
        if earlier is not None:
            received_at = earlier[1] or received_at
            db.execute("INSERT INTO grading_history (student_id, assignment_id, sha256, submitted_at, "
                       "graded_at, total, max_points, fingerprint, result_json, replaced_at, replaced_because) "
                       "SELECT student_id, assignment_id, sha256, submitted_at, graded_at, total, max_points, "
                       "fingerprint, result_json, ?, ? FROM submissions WHERE id = ?",
                       (when, replaced_because, earlier[0]))
            db.execute("DELETE FROM submissions WHERE id = ?", (earlier[0],))
        db.execute("DELETE FROM batch_errors WHERE student_id = ? AND assignment_id = ? AND sha256 = ?", key)
        cursor = db.execute(
            "INSERT INTO submissions (student_id, assignment_id, sha256, form, submitted_at, "
            "graded_at, seed, isolation, total, raw, late_penalty, late_days, max_points, "
            "pending_points, duration_s, result_json, fingerprint, received_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (result.student, result.assignment_id, result.submission_sha256,
             result.submission_form, result.submitted_at, result.graded_at, result.seed,
             result.isolation_level, score.total, score.raw, score.late_penalty,
             score.late_days, score.max_points, score.pending_points, result.duration_s,
             json.dumps(result.to_dict()), result.fingerprint or None, received_at))
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

    # ------------------------------------------------------------------ jobs (grade serve)
    def enqueue_job(self, student_id: str, assignment_id: str, sha256: str, upload_name: str, upload: bytes,
                    submitted_at: str, *, tier: str = "cpu", reason: str = "uploaded",
                    limit: tuple[int, str] | None = None) -> tuple[JobRecord | None, bool]:
        """Queue the grading of one upload; the same files again (same student, assignment, digest and
        tier) are the same job. `limit` (most, since ISO): no new job when the student's uploads of the
        assignment since then number `most` already (checked in the same transaction). Returns the job
        (None: over the limit) and whether it is new."""
        if tier not in JOB_TIERS:
            raise ValueError(tier)
        with self._transaction() as db:
            existing = db.execute(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE student_id = ? AND assignment_id = ? AND "
                                  "sha256 = ? AND tier = ?", (student_id, assignment_id, sha256, tier)).fetchone()
            if existing is not None:
                return JobRecord(*existing), False
            if limit is not None:
                used = db.execute("SELECT COUNT(*) FROM jobs WHERE student_id = ? AND assignment_id = ? AND "
                                  "tier = ? AND submitted_at >= ?", (student_id, assignment_id, tier, limit[1]))
                if used.fetchone()[0] >= limit[0]:
                    return None, False
            db.execute("INSERT INTO students (id) VALUES (?) ON CONFLICT(id) DO NOTHING", (student_id,))
            cursor = db.execute(
                "INSERT INTO jobs (student_id, assignment_id, sha256, tier, state, upload_name, upload, submitted_at, "
                "reason) VALUES (?, ?, ?, ?, 'queued', ?, ?, ?, ?) "
                "ON CONFLICT (student_id, assignment_id, sha256, tier) DO NOTHING",
                (student_id, assignment_id, sha256, tier, upload_name, upload, submitted_at, reason))
            created = cursor.rowcount == 1
            row = db.execute(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE student_id = ? AND assignment_id = ? AND "
                             "sha256 = ? AND tier = ?", (student_id, assignment_id, sha256, tier)).fetchone()
        return JobRecord(*row), created

    def enqueue_timing(self, cpu_job_id: int, submitted_at: str, *, quota: int,
                       since: str) -> tuple[JobRecord | None, str]:
        """Queue the GPU timing of a graded CPU job's files: the student's timing of the same assignment still
        queued is superseded (the latest wins), and none is queued when the student had `quota` timings
        granted since `since` (ISO). Returns the timing job (None when refused) and why, in words."""
        with self._transaction() as db:
            row = db.execute("SELECT student_id, assignment_id, sha256 FROM jobs WHERE id = ? AND tier = 'cpu'",
                             (cpu_job_id,)).fetchone()
            if row is None:
                return None, "no such graded upload"
            student, assignment, sha = row
            used = db.execute("SELECT COUNT(*) FROM jobs WHERE tier = 'gpu' AND student_id = ? AND assignment_id = ? "
                              "AND attempts > 0 AND submitted_at >= ? AND sha256 != ?",
                              (student, assignment, since, sha)).fetchone()[0]
            if used >= quota:
                return None, f"GPU quota reached: {quota} timings a day"
            db.execute("UPDATE jobs SET state = 'superseded', error = 'a newer submission was queued for timing' "
                       "WHERE tier = 'gpu' AND student_id = ? AND assignment_id = ? AND state = 'queued' AND "
                       "sha256 != ?", (student, assignment, sha))
            db.execute("INSERT INTO jobs (student_id, assignment_id, sha256, tier, state, upload_name, upload, "
                       "submitted_at, reason) SELECT student_id, assignment_id, sha256, 'gpu', 'queued', upload_name, "
                       "upload, ?, 'timing on a GPU' FROM jobs WHERE id = ? "
                       "ON CONFLICT (student_id, assignment_id, sha256, tier) DO NOTHING", (submitted_at, cpu_job_id))
            job = db.execute(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE student_id = ? AND assignment_id = ? AND "
                             "sha256 = ? AND tier = 'gpu'", (student, assignment, sha)).fetchone()
        return JobRecord(*job), "queued for timing on a GPU"

    def grant_job(self, tier: str, now: float, lease_s: float) -> tuple[JobRecord, bytes] | None:
        """The oldest queued job of `tier`, now running under a lease until `now + lease_s`, with its upload;
        None when none is queued."""
        with self._transaction() as db:
            row = db.execute("SELECT id FROM jobs WHERE tier = ? AND state = 'queued' ORDER BY id LIMIT 1",
                             (tier,)).fetchone()
            if row is None:
                return None
            db.execute("UPDATE jobs SET state = 'running', attempts = attempts + 1, lease_until = ?, "
                       "heartbeat_at = ?, started_at = ?, error = NULL WHERE id = ?",
                       (now + lease_s, now, now, row[0]))
            job = db.execute(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE id = ?", (row[0],)).fetchone()
            upload = db.execute("SELECT upload FROM jobs WHERE id = ?", (row[0],)).fetchone()[0]
        return JobRecord(*job), bytes(upload)

    def heartbeat_jobs(self, job_ids: list[int], now: float, lease_s: float) -> None:
        """The running jobs `job_ids` are alive: their leases run until `now + lease_s`."""
        with self._transaction() as db:
            db.executemany("UPDATE jobs SET heartbeat_at = ?, lease_until = ? WHERE id = ? AND state = 'running'",
                           [(now, now + lease_s, job_id) for job_id in job_ids])

    def requeue_job(self, job_id: int, why: str, *, max_attempts: int | None = None) -> str:
        """A running job whose worker died: queued again, or failed with `why` once it was granted
        `max_attempts` times. Returns its new state."""
        with self._transaction() as db:
            row = db.execute("SELECT attempts, state FROM jobs WHERE id = ?", (job_id,)).fetchone()
            if row is None or row[1] != "running":
                return row[1] if row else "missing"
            state = "failed" if max_attempts is not None and row[0] >= max_attempts else "queued"
            db.execute("UPDATE jobs SET state = ?, error = ?, lease_until = NULL, finished_at = ? WHERE id = ?",
                       (state, storable(why), datetime.now(UTC).timestamp() if state == "failed" else None, job_id))
        return state

    def expire_leases(self, now: float) -> list[int]:
        """Running jobs whose lease has passed (their server or worker stopped heartbeating): queued again.
        Returns their ids."""
        with self._transaction() as db:
            ids = [r[0] for r in db.execute("SELECT id FROM jobs WHERE state = 'running' AND "
                                            "(lease_until IS NULL OR lease_until < ?)", (now,))]
            db.executemany("UPDATE jobs SET state = 'queued', lease_until = NULL, "
                           "error = 'its lease expired: granted again' WHERE id = ?", [(i,) for i in ids])
        return ids

    def release_running_jobs(self) -> list[int]:
        """Every running job queued again (a server starting: nothing of its own is running yet)."""
        return self.expire_leases(float("inf"))

    def finish_job(self, job_id: int, result: GradeResult | None, submission: Submission | None, *,
                   error: str | None = None, replaced_because: str = "graded again") -> bool:
        """A running job's outcome: its grading recorded (or `error`) and the job done (or failed), in one
        transaction. A job that is not running any more (already finished) records nothing: False."""
        with self._transaction() as db:
            row = db.execute("SELECT state FROM jobs WHERE id = ?", (job_id,)).fetchone()
            if row is None or row[0] != "running":
                return False
            now = datetime.now(UTC).timestamp()
            if result is not None and submission is not None:
                self._record(db, result, submission, replaced_because)
                db.execute("UPDATE jobs SET state = 'done', recorded = recorded + 1, finished_at = ?, "
                           "lease_until = NULL, error = NULL WHERE id = ?", (now, job_id))
            else:
                db.execute("UPDATE jobs SET state = 'failed', finished_at = ?, lease_until = NULL, error = ? "
                           "WHERE id = ?", (now, storable(error or "not graded"), job_id))
        return True

    def regrade_jobs(self, assignment_id: str | None = None, student_id: str | None = None, *,
                     reason: str = "regraded by staff") -> int:
        """Queue again the latest CPU job of each student (of one assignment or all, of one student or all)
        when it has finished; how many were queued."""
        where, params = ["tier = 'cpu'"], []
        if assignment_id is not None:
            where.append("assignment_id = ?")
            params.append(assignment_id)
        if student_id is not None:
            where.append("student_id = ?")
            params.append(student_id)
        with self._transaction() as db:
            latest = [r[0] for r in db.execute(
                f"SELECT MAX(id) FROM jobs WHERE {' AND '.join(where)} GROUP BY student_id, assignment_id",
                tuple(params))]
            ids = [i for i in latest  # one already queued or running is left as it is
                   if db.execute("SELECT state FROM jobs WHERE id = ?", (i,)).fetchone()[0] in ("done", "failed")]
            db.executemany("UPDATE jobs SET state = 'queued', reason = ?, attempts = 0, error = NULL, "
                           "finished_at = NULL WHERE id = ?", [(reason, i) for i in ids])
        return len(ids)

    def job(self, job_id: int) -> JobRecord | None:
        row = self._db.execute(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return JobRecord(*row) if row else None

    def jobs(self, *, assignment_id: str | None = None, student_id: str | None = None,
             states: tuple[str, ...] | None = None, tier: str | None = None) -> list[JobRecord]:
        """Jobs, oldest first, filtered by assignment, student, states and tier."""
        where, params = ["1 = 1"], []
        for column, value in (("assignment_id", assignment_id), ("student_id", student_id), ("tier", tier)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        if states is not None:
            where.append(f"state IN ({', '.join('?' for _ in states)})")
            params.extend(states)
        rows = self._db.execute(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE {' AND '.join(where)} ORDER BY id",
                                tuple(params)).fetchall()
        return [JobRecord(*row) for row in rows]

    def jobs_ahead(self, job: JobRecord) -> int:
        """Queued jobs of the same tier granted before `job` (0 when it is next or not queued)."""
        if job.state != "queued":
            return 0
        return self._db.execute("SELECT COUNT(*) FROM jobs WHERE tier = ? AND state = 'queued' AND id < ?",
                                (job.tier, job.id)).fetchone()[0]

    def job_counts(self, tier: str) -> dict[str, int]:
        """state → how many jobs of `tier` are in it."""
        rows = self._db.execute("SELECT state, COUNT(*) FROM jobs WHERE tier = ? GROUP BY state", (tier,))
        return {state: count for state, count in rows}

    def recent_job_seconds(self, tier: str, last: int = 20) -> list[float]:
        """How long the last `last` finished jobs of `tier` ran (grant to finish), newest first."""
        rows = self._db.execute("SELECT finished_at - started_at FROM jobs WHERE tier = ? AND state = 'done' AND "
                                "finished_at IS NOT NULL AND started_at IS NOT NULL ORDER BY finished_at DESC "
                                "LIMIT ?", (tier, last))
        return [max(0.0, r[0]) for r in rows]

    def uploads_since(self, student_id: str, assignment_id: str, since_iso: str) -> list[str]:
        """When the student's uploads (CPU jobs, regrades not counted twice) arrived since `since_iso`, oldest
        first."""
        rows = self._db.execute("SELECT submitted_at FROM jobs WHERE student_id = ? AND assignment_id = ? AND "
                                "tier = 'cpu' AND submitted_at >= ? ORDER BY submitted_at",
                                (student_id, assignment_id, since_iso))
        return [r[0] for r in rows]

    def record_error(self, student_id: str, assignment_id: str, sha256: str, error: str,
                     kind: str = GRADER_ERROR) -> None:
        """A submission the grader could not grade (kept so nothing is silently lost), and why: `kind`
        HANDIN_PROBLEM (its hand-in could not be read as one) or GRADER_ERROR."""
        with self._transaction() as db:
            db.execute("INSERT INTO students (id) VALUES (?) ON CONFLICT(id) DO NOTHING",
                       (student_id,))
            db.execute("INSERT OR REPLACE INTO batch_errors (student_id, assignment_id, sha256, "
                       "error, kind) VALUES (?, ?, ?, ?, ?)", (student_id, assignment_id, sha256, error, kind))

    # --------------------------------------------------------- staff decisions
    def add_override(self, student_id: str, assignment_id: str, task_id: str | None, points: float,
                     reason: str, *, sha256: str, total_before: float, total_after: float,
                     author: str | None = None) -> OverrideRecord:
        """Record an override (the caller has checked it against the manifest and computed both totals).
        An active override of the same task (or total) is cleared, replaced by this one."""
        author = author or default_author()
        when = now_iso()
        with self._transaction() as db:
            db.execute("UPDATE overrides SET cleared_at = ?, cleared_by = ?, cleared_reason = ? "
                       "WHERE student_id = ? AND assignment_id = ? AND task_id IS ? AND cleared_at IS NULL",
                       (when, author, "replaced by a newer override", student_id, assignment_id, task_id))
            cursor = db.execute(
                "INSERT INTO overrides (student_id, assignment_id, task_id, points, reason, author, created_at, "
                "sha256, total_before, total_after) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (student_id, assignment_id, task_id, points, reason, author, when, sha256, total_before,
                 total_after))
            row = db.execute(f"SELECT {_OVERRIDE_COLUMNS} FROM overrides WHERE id = ?",
                             (cursor.lastrowid,)).fetchone()
        return OverrideRecord(*row)

    def clear_overrides(self, student_id: str, assignment_id: str, task_id: str | None, reason: str,
                        author: str | None = None, *, every_task: bool = False) -> list[OverrideRecord]:
        """Clear the active override of `task_id` (None: of the total), or all of them with `every_task`.
        The rows stay, marked cleared, by whom and why. Returns what was cleared."""
        author = author or default_author()
        where = "student_id = ? AND assignment_id = ? AND cleared_at IS NULL"
        params: tuple = (student_id, assignment_id)
        if not every_task:
            where += " AND task_id IS ?"
            params += (task_id,)
        with self._transaction() as db:
            ids = [r[0] for r in db.execute(f"SELECT id FROM overrides WHERE {where}", params)]
            db.executemany("UPDATE overrides SET cleared_at = ?, cleared_by = ?, cleared_reason = ? WHERE id = ?",
                           [(now_iso(), author, reason, i) for i in ids])
            rows = [db.execute(f"SELECT {_OVERRIDE_COLUMNS} FROM overrides WHERE id = ?", (i,)).fetchone()
                    for i in ids]
        return [OverrideRecord(*row) for row in rows]

    def set_extension(self, student_id: str, assignment_id: str, *, extra: timedelta | None = None,
                      until: datetime | None = None, reason: str, author: str | None = None) -> ExtensionRecord:
        """Extra time (`extra`) or a deadline of the student's own (`until`, with a zone) for one
        assignment (EVERY_ASSIGNMENT: all of them). Replaces the active one, which stays in the audit."""
        if (extra is None) == (until is None):
            raise ValueError("give exactly one of extra and until")
        author = author or default_author()
        with self._transaction() as db:
            db.execute("INSERT INTO students (id) VALUES (?) ON CONFLICT(id) DO NOTHING", (student_id,))
            self._clear_extensions(db, student_id, assignment_id, author, "replaced by a newer extension")
            cursor = db.execute(
                "INSERT INTO extensions (student_id, assignment_id, extra_s, until, reason, author, granted_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (student_id, assignment_id, extra.total_seconds() if extra is not None else None,
                 until.isoformat() if until is not None else None, reason, author, now_iso()))
            row = db.execute(f"SELECT {_EXTENSION_COLUMNS} FROM extensions WHERE id = ?",
                             (cursor.lastrowid,)).fetchone()
        return ExtensionRecord(*row)

    def clear_extension(self, student_id: str, assignment_id: str, reason: str,
                        author: str | None = None) -> int:
        """End the student's active extension for `assignment_id`; how many were ended (0 or 1)."""
        with self._transaction() as db:
            return self._clear_extensions(db, student_id, assignment_id, author or default_author(), reason)

    @staticmethod
    def _clear_extensions(db: sqlite3.Connection, student_id: str, assignment_id: str, author: str,
                          reason: str) -> int:
        return db.execute("UPDATE extensions SET cleared_at = ?, cleared_by = ?, cleared_reason = ? "
                          "WHERE student_id = ? AND assignment_id = ? AND cleared_at IS NULL",
                          (now_iso(), author, reason, student_id, assignment_id)).rowcount

    @staticmethod
    def _active_extension(db: sqlite3.Connection, student_id: str, assignment_id: str) -> ExtensionRecord | None:
        row = db.execute(f"SELECT {_EXTENSION_COLUMNS} FROM extensions WHERE student_id = ? AND "
                         "assignment_id = ? AND cleared_at IS NULL ORDER BY id DESC", (student_id, assignment_id)
                         ).fetchone()
        return ExtensionRecord(*row) if row else None

    # ------------------------------------------------------------------ reads
    def _records(self, where: str, params: tuple) -> list[SubmissionRecord]:
        rows = self._db.execute(
            f"SELECT {_SUBMISSION_COLUMNS} FROM submissions WHERE {where} "
            "ORDER BY student_id, COALESCE(submitted_at, received_at, graded_at), id", params).fetchall()
        return [SubmissionRecord(*row[:9], GradeResult.from_dict(json.loads(row[9])), fingerprint=row[10])
                for row in rows]

    def submissions(self, assignment_id: str, student_id: str | None = None) -> list[SubmissionRecord]:
        if student_id is None:
            return self._records("assignment_id = ?", (assignment_id,))
        return self._records("assignment_id = ? AND student_id = ?", (assignment_id, student_id))

    def latest(self, assignment_id: str) -> dict[str, SubmissionRecord]:
        """Each student's latest graded submission of an assignment (its current grading)."""
        latest: dict[str, SubmissionRecord] = {}
        for record in self.submissions(assignment_id):
            latest[record.student_id] = record  # ordered by time: the last one wins
        return latest

    def latest_for(self, assignment_id: str, student_id: str) -> SubmissionRecord | None:
        records = self.submissions(assignment_id, student_id)
        return records[-1] if records else None

    def has(self, student_id: str, assignment_id: str, sha256: str) -> bool:
        row = self._db.execute("SELECT 1 FROM submissions WHERE student_id = ? AND "
                               "assignment_id = ? AND sha256 = ?",
                               (student_id, assignment_id, sha256)).fetchone()
        return row is not None

    def graded_fingerprint(self, student_id: str, assignment_id: str, sha256: str) -> str | None:
        """The fingerprint these files were graded with; None when they were never graded,
        "" when they were graded before fingerprints were kept."""
        row = self._db.execute("SELECT fingerprint FROM submissions WHERE student_id = ? AND "
                               "assignment_id = ? AND sha256 = ?",
                               (student_id, assignment_id, sha256)).fetchone()
        return None if row is None else (row[0] or "")

    def history(self, assignment_id: str, student_id: str | None = None) -> list[Grading]:
        """Every grading of the assignment (or of one student's submissions), oldest first: the current
        grading of each submission and every earlier one it replaced. Exactly one row per student is
        `current`: the latest submission's grading, the one that counts; an earlier submission's is
        replaced because LATER_SUBMISSION."""
        where, params = "assignment_id = ?", (assignment_id,)
        if student_id is not None:
            where, params = where + " AND student_id = ?", params + (student_id,)
        counting = {record.student_id: record.sha256 for record in self._records(where, params)}  # as latest()
        current = [Grading(*row, current=counting.get(row[0]) == row[1],
                           replaced_because=None if counting.get(row[0]) == row[1] else LATER_SUBMISSION)
                   for row in self._db.execute("SELECT student_id, sha256, graded_at, total, max_points, "
                                               f"fingerprint FROM submissions WHERE {where}", params)]
        earlier = [Grading(*row[:6], current=False, replaced_at=row[6], replaced_because=row[7])
                   for row in self._db.execute(
                       "SELECT student_id, sha256, graded_at, total, max_points, fingerprint, replaced_at, "
                       f"replaced_because FROM grading_history WHERE {where} ORDER BY id", params)]
        return sorted(current + earlier, key=lambda g: (g.student_id, g.graded_at, g.current))

    def earlier_results(self, assignment_id: str, student_id: str) -> list[GradeResult]:
        """The results of the earlier gradings of one student's submissions, oldest first."""
        rows = self._db.execute("SELECT result_json FROM grading_history WHERE assignment_id = ? AND "
                                "student_id = ? ORDER BY id", (assignment_id, student_id)).fetchall()
        return [GradeResult.from_dict(json.loads(row[0])) for row in rows]

    def overrides(self, assignment_id: str, student_id: str | None = None, *,
                  include_cleared: bool = False) -> list[OverrideRecord]:
        where, params = "assignment_id = ?", (assignment_id,)
        if student_id is not None:
            where, params = where + " AND student_id = ?", params + (student_id,)
        if not include_cleared:
            where += " AND cleared_at IS NULL"
        rows = self._db.execute(f"SELECT {_OVERRIDE_COLUMNS} FROM overrides WHERE {where} "
                                "ORDER BY student_id, id", params).fetchall()
        return [OverrideRecord(*row) for row in rows]

    def extension_for(self, student_id: str, assignment_id: str) -> ExtensionRecord | None:
        """The student's extension for this assignment: its own if granted, else the roster's for all."""
        return (self._active_extension(self._db, student_id, assignment_id)
                or self._active_extension(self._db, student_id, EVERY_ASSIGNMENT))

    def due_date(self, student_id: str, manifest: Manifest) -> DueDate:
        """The student's due date for the assignment: the manifest's, with their extension applied."""
        return due_with(manifest, self.extension_for(student_id, manifest.id))

    def extensions(self, assignment_id: str) -> dict[str, ExtensionRecord]:
        """student → the extension that applies to them for this assignment (see extension_for)."""
        rows = self._db.execute(f"SELECT {_EXTENSION_COLUMNS} FROM extensions WHERE cleared_at IS NULL AND "
                                "assignment_id IN (?, ?) ORDER BY id", (EVERY_ASSIGNMENT, assignment_id)).fetchall()
        found: dict[str, ExtensionRecord] = {}
        for record in (ExtensionRecord(*row) for row in rows):
            mine = found.get(record.student_id)
            if record.assignment_id == assignment_id or mine is None or mine.assignment_id == EVERY_ASSIGNMENT:
                found[record.student_id] = record  # the assignment's own wins over the roster's
        return found

    def files(self, submission_id: int) -> dict[str, bytes]:
        rows = self._db.execute("SELECT path, content FROM submission_files WHERE "
                                "submission_id = ?", (submission_id,)).fetchall()
        return {path: bytes(content) for path, content in rows}

    def students(self) -> list[dict]:
        rows = self._db.execute("SELECT id, name, email FROM students ORDER BY id").fetchall()
        return [{"id": r[0], "name": r[1], "email": r[2]} for r in rows]

    def roster(self) -> list[RosterEntry]:
        """The students a roster listed (grade roster import), by id."""
        rows = self._db.execute("SELECT id, name, email, section, rostered_at FROM students "
                                "WHERE rostered_at IS NOT NULL ORDER BY id").fetchall()
        return [RosterEntry(*row) for row in rows]

    def extensions_for_every_assignment(self) -> dict[str, ExtensionRecord]:
        """student → their active extension on every assignment (the roster's `extension_days`)."""
        rows = self._db.execute(f"SELECT {_EXTENSION_COLUMNS} FROM extensions WHERE cleared_at IS NULL AND "
                                "assignment_id = ? ORDER BY id", (EVERY_ASSIGNMENT,)).fetchall()
        return {record.student_id: record for record in (ExtensionRecord(*row) for row in rows)}

    def graded_assignments(self) -> dict[str, list[str]]:
        """student → the assignments they have a graded submission of, sorted."""
        found: dict[str, list[str]] = {}
        for student, assignment in self._db.execute("SELECT DISTINCT student_id, assignment_id FROM submissions "
                                                    "ORDER BY student_id, assignment_id"):
            found.setdefault(student, []).append(assignment)
        return found

    def errors(self, assignment_id: str) -> list[dict]:
        """The submissions of the assignment not graded: student, sha256, error, recorded_at and kind
        (HANDIN_PROBLEM or GRADER_ERROR)."""
        rows = self._db.execute("SELECT student_id, sha256, error, recorded_at, kind FROM batch_errors "
                                "WHERE assignment_id = ? ORDER BY student_id",
                                (assignment_id,)).fetchall()
        return [{"student": r[0], "sha256": r[1], "error": r[2], "recorded_at": r[3], "kind": r[4] or GRADER_ERROR}
                for r in rows]

    def count(self, table: str) -> int:
        if table not in TABLES:
            raise ValueError(table)
        return self._db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
