"""The records that flow from a run to scoring, storage and reports.

Every layer above reads and writes these; none of them imports anything but
the standard library, so storage and rendering never pull in torch, pytest or
the sandbox. Statuses and failure kinds are string enums: they compare equal
to, and serialise as, their plain strings.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from grader.core.compat import StrEnum


class Status(StrEnum):
    """A test's verdict."""

    PASSED = "passed"
    FAILED = "failed"
    PENDING = "pending"  # not judged here (e.g. timing without a GPU): neither pass nor fail


class Kind(StrEnum):
    """Why a test failed, or why it was not judged ("" for a pass)."""

    NONE = ""
    WRONG = "wrong"
    RAISED = "raised"
    NOT_IMPLEMENTED = "not_implemented"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    FORBIDDEN = "forbidden"
    MISSING = "missing"
    IMPORT_FAILED = "import_failed"
    UNSUPPORTED = "unsupported"
    BUDGET = "budget"
    DISK = "disk"  # the worker's folder reached its write budget
    DEGENERATE = "degenerate"
    TEST_ERROR = "test_error"
    NOT_RUN = "not_run"


PASSED, FAILED, PENDING = Status.PASSED, Status.FAILED, Status.PENDING

# Why a submission was not graded (a batch error's kind): its hand-in could not be read as one (an
# empty folder, a truncated zip, an entry misnamed), which the student fixes; or the grader failed on it.
HANDIN_PROBLEM, GRADER_ERROR = "hand-in", "grader"


@dataclass(frozen=True)
class TestOutcome:
    """One test's verdict. `fraction` is the share of the test's credit earned."""

    __test__ = False  # not a pytest test class

    name: str
    task: str | None
    status: Status
    kind: Kind = Kind.NONE
    message: str = ""
    fraction: float = 0.0
    duration_s: float = 0.0
    visibility: str = "hidden"  # hidden | visible
    diagnosis: dict | None = None
    measured: str = ""
    heatmap: dict | None = None
    output: str = ""  # what the student's code printed during this test (escaped when shown)
    detail: dict = field(default_factory=dict)
    # What went wrong, as data (grader.harness.testing): "key" names the cause (reports group
    # failures by it, after the diagnosis), "summary" says it in a few words, "text" is what was
    # measured, with the numbers behind it (tolerance, errors, ...). None in older records.
    problem: dict | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", Status(self.status))
        object.__setattr__(self, "kind", Kind(self.kind))

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> TestOutcome:
        return cls(**data)


@dataclass(frozen=True)
class StaticFinding:
    """A forbidden API (or another static rule) found in the source: the whole task earns 0."""

    task: str
    function: str
    group: str
    line: int
    code: str
    where: str = ""  # the student's function whose code holds it, when not `function` itself (a helper)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class TaskScore:
    task_id: str
    title: str
    kind: str
    earned: float
    points: float
    passed: int
    failed: int
    pending: int
    bonus: bool = False
    status: str = "graded"  # graded | pending | forbidden | no_tests
    reason: str = ""
    sections: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class TestScore:
    """One test's share of its task's points, as scoring allocated them."""

    __test__ = False

    name: str
    task: str | None
    max_score: float
    score: float

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Override:
    """A staff decision that replaces computed points, with its audit: who, when, why.

    `task` None sets the assignment's total (after the late penalty); a task id sets
    that task's points (before it). `computed` is what the grader had computed for
    it when the override was applied (filled in by scoring.final_score)."""

    task: str | None
    points: float
    reason: str
    author: str
    created_at: str
    computed: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Score:
    tasks: tuple[TaskScore, ...]
    raw: float  # before the late penalty, bonus included
    late_days: int
    late_penalty: float  # points taken off
    total: float
    max_points: float  # non-bonus points of the assignment
    pending_points: float  # points not judged here (e.g. timing without a GPU)
    bonus_earned: float
    tests: tuple[TestScore, ...] = ()  # per-test points, in outcome order
    due_at: str | None = None  # the deadline the late policy applied (extensions included), ISO 8601
    extension_s: float = 0.0  # seconds added to the deadline for this student
    overrides: tuple[Override, ...] = ()  # staff overrides applied (scoring.final_score)
    computed_total: float | None = None  # the total before the overrides, when there are any

    def to_dict(self) -> dict:
        data = asdict(self)
        data["tasks"] = [t.to_dict() for t in self.tasks]
        data["tests"] = [t.to_dict() for t in self.tests]
        data["overrides"] = [o.to_dict() for o in self.overrides]
        return data

    @classmethod
    def from_dict(cls, data: dict) -> Score:
        return cls(**{**data,
                      "tasks": tuple(TaskScore(**{**t, "sections": tuple(t["sections"])}) for t in data["tasks"]),
                      "tests": tuple(TestScore(**t) for t in data.get("tests", ())),
                      "overrides": tuple(Override(**o) for o in data.get("overrides", ()))})


@dataclass(frozen=True)
class FileProblem:
    """A file of the submission the grader could not use: `kind` "missing" (a manifest file that was
    not handed in) or "syntax" (not valid Python, `detail` says where)."""

    kind: str
    file: str
    detail: str = ""

    def describe(self) -> str:
        return f"{self.file}: syntax error: {self.detail}" if self.kind == "syntax" else f"{self.file} is missing"

    def to_dict(self) -> dict:
        return asdict(self)


def _legacy_file_problems(notes: tuple[str, ...]) -> tuple[FileProblem, ...]:
    """Records written before file problems were kept as data said them only in their notes: read those
    notes once, when such a record is loaded (a newer record carries `file_problems` itself)."""
    found = []
    for note in notes:
        if note.startswith("missing file(s):"):
            found += [FileProblem("missing", name.strip()) for name in note.split(":", 1)[1].split(",")]
        elif ": syntax error: " in note:
            filename, problem = note.split(": syntax error: ", 1)
            found.append(FileProblem("syntax", filename, problem))
    return tuple(found)


@dataclass(frozen=True)
class GradeResult:
    """Everything known about one grading run (serialisable)."""

    assignment_id: str
    assignment_title: str
    student: str
    mode: str
    score: Score
    outcomes: tuple[TestOutcome, ...]
    findings: tuple[StaticFinding, ...]
    submission_sha256: str
    submission_form: str
    submitted_at: str | None
    graded_at: str
    seed: int
    isolation: str
    isolation_level: str  # the layers that took effect, e.g. process+uid+landlock+seccomp+reaper
    duration_s: float
    versions: dict = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    student_output: str = ""
    sandbox_override: bool = False  # graded with --allow-weak-sandbox below the course's requirement
    fingerprint: str = ""  # what graded it: manifest, reference/<id>/, grader version (core.fingerprint)
    file_problems: tuple[FileProblem, ...] = ()  # files missing or not valid Python, as data
    sandbox_gaps: tuple[str, ...] = ()  # each layer this host could have given but did not, with its fix

    def to_dict(self) -> dict:
        data = asdict(self)
        data["score"] = self.score.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: dict) -> GradeResult:
        notes = tuple(data.get("notes", ()))
        problems = (tuple(FileProblem(**p) for p in data["file_problems"]) if "file_problems" in data
                    else _legacy_file_problems(notes))
        return cls(**{**data, "score": Score.from_dict(data["score"]),
                      "outcomes": tuple(TestOutcome.from_dict(o) for o in data["outcomes"]),
                      "findings": tuple(StaticFinding(**f) for f in data["findings"]),
                      "notes": notes, "file_problems": problems,
                      "sandbox_gaps": tuple(data.get("sandbox_gaps", ()))})
