"""A class of mixed submissions for the tiny fixture course (tests/fixtures/mini_course).

`build_class(root)` copies the course to root/course and writes one entry per
student into root/submissions, plus timestamps.csv. `EXPECTED` says what each
student should get, so tests check every gradebook record against it.

Course: double (40 points, 2 tests), normalize (40, 3 tests), quiz (20, 2
questions of 10). Deadline 2026-12-01T12:00+00:00, 10 minutes' grace, 25% per
started day, more than 2 days late earns 0.
"""

from __future__ import annotations

import json
import os
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import copy_mini_course

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "mini_course"
ASSIGNMENT = "mini"

HEADER = '"""Mini assignment."""\n\nimport torch\n\n\n'

CORRECT_A = HEADER + '''def double(x: torch.Tensor) -> torch.Tensor:
    """Return 2·x, same shape and dtype (§6)."""
    return x * 2


def normalize(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension, written by hand (§10)."""
    shifted = x - x.amax(dim=-1, keepdim=True)  # (..., n)
    weights = shifted.exp()
    return weights / weights.sum(dim=-1, keepdim=True)
'''

# the same code as CORRECT_A with other names, comments and layout: a disguised copy
DISGUISED_A = HEADER + '''def double(t: torch.Tensor) -> torch.Tensor:
    """Return 2·x, same shape and dtype (§6)."""
    # multiply by two
    return t * 2



def normalize(inp: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension, written by hand (§10)."""
    s = inp - inp.amax(dim = -1, keepdim = True)   # stability
    e = s.exp()

    return e / e.sum(dim = -1, keepdim = True)
'''

CORRECT_B = '''import math

import torch


def double(x):
    out = torch.empty_like(x)
    out.copy_(x)
    out.add_(x)
    return out


def _row_max(x):
    best, _ = torch.max(x, dim=x.dim() - 1)
    return best.unsqueeze(-1)


def normalize(x):
    numerators = torch.exp(x - _row_max(x))
    denominators = torch.sum(numerators, dim=x.dim() - 1).unsqueeze(-1)
    assert not math.isnan(float(denominators.min()))
    return numerators / denominators
'''

CORRECT_C = HEADER + '''def double(values):
    return values + values


def normalize(values):
    rows = values.reshape(-1, values.shape[-1])
    result = []
    for row in rows:
        top = row.max()
        powers = (row - top).exp()
        result.append(powers / powers.sum())
    return torch.stack(result).reshape(values.shape)
'''

WRONG_AXIS = HEADER + '''def double(x):
    return 2 * x


def normalize(x):
    shifted = x - x.amax(dim=0, keepdim=True)
    weights = shifted.exp()
    return weights / weights.sum(dim=0, keepdim=True)
'''

SQUARES = HEADER + '''def double(x):
    return x * x


def normalize(x):
    top = x.max(dim=-1, keepdim=True).values
    numer = torch.exp(x - top)
    return numer / numer.sum(-1, keepdim=True)
'''

NO_SHIFT = HEADER + '''def double(x):
    return x.mul(2)


def normalize(x):
    # no max subtraction: overflows for large scores
    e = torch.exp(x)
    return e / e.sum(dim=-1, keepdim=True)
'''

FORBIDDEN = HEADER + '''def double(x):
    return x.clone() * 2.0


def normalize(x):
    return torch.softmax(x, dim=-1)
'''

RAISES = HEADER + '''def double(x):
    raise RuntimeError("not today")


def normalize(x):
    m = x.amax(-1, keepdim=True)
    z = (x - m).exp()
    return z / z.sum(-1, keepdim=True)
'''

SYNTAX_ERROR = HEADER + '''def double(x)
    return x * 2
'''

ANSWERS_RIGHT = 'row_sum = 1\nratio = 1.43\n'
ANSWERS_HALF = 'row_sum = 1\nratio = 2.5\n'

STUB = (FIXTURE / "assignments" / ASSIGNMENT / "mini.py").read_text()
REFERENCE = (FIXTURE / "reference" / ASSIGNMENT / "mini.py").read_text()

DEADLINE_ON_TIME = "2026-12-01T11:00:00+00:00"
ONE_DAY_LATE = "2026-12-02T08:00:00+00:00"  # 20 h late: 1 started day, 25 % off
FOUR_DAYS_LATE = "2026-12-05T08:00:00+00:00"  # more than max_days_late: 0

# normalize's 3 tests share its 40 points in hundredths by largest remainder: 13.34 + 13.33 + 13.33;
# no_shift passes the first two (26.67), not 80 / 3.
SCORES = {  # code → (double, normalize) points
    "correct": (40, 40), "wrong_axis": (40, 0), "squares": (0, 40), "no_shift": (40, 26.67),
    "forbidden": (40, 0), "raises": (0, 40), "syntax": (0, 0), "stub": (0, 0),
}


@dataclass(frozen=True)
class Student:
    id: str
    form: str  # folder | zip | notebook | invalid_notebook | bad_zip
    code: str = ""
    kind: str = "correct"  # key of SCORES
    answers: str | None = ANSWERS_RIGHT
    submitted_at: str | None = DEADLINE_ON_TIME
    late_days: int = 0
    diagnoses: tuple[str, ...] = ()

    @property
    def error(self) -> bool:
        return self.form in ("invalid_notebook", "bad_zip")

    @property
    def expected_total(self) -> float:
        double, normalize = SCORES[self.kind]
        quiz = {ANSWERS_RIGHT: 20.0, ANSWERS_HALF: 10.0, None: 0.0}[self.answers]
        if self.form == "notebook":
            quiz = 0.0  # a notebook carries no answers.toml
        raw = double + normalize + quiz
        fraction = {0: 0.0, 1: 0.25}.get(self.late_days, 1.0)
        return round(raw - round(raw * fraction, 4), 4)


def _students() -> list[Student]:
    s = []
    for i in range(1, 5):
        s.append(Student(f"s{i:02d}", "folder", CORRECT_A if i < 3 else CORRECT_B))
    s.append(Student("s05", "folder", CORRECT_C))
    s.append(Student("s06", "folder", CORRECT_C, answers=ANSWERS_HALF))
    s.append(Student("s07", "folder", CORRECT_B, answers=None))
    s.append(Student("s08", "folder", WRONG_AXIS, "wrong_axis", diagnoses=("normalize_wrong_axis",)))
    s.append(Student("s09", "folder", WRONG_AXIS, "wrong_axis", answers=ANSWERS_HALF,
                     diagnoses=("normalize_wrong_axis",)))
    s.append(Student("s10", "zip", WRONG_AXIS, "wrong_axis", diagnoses=("normalize_wrong_axis",)))
    s.append(Student("s11", "folder", SQUARES, "squares", diagnoses=("double_square",)))
    s.append(Student("s12", "folder", SQUARES, "squares", answers=None, diagnoses=("double_square",)))
    s.append(Student("s13", "folder", NO_SHIFT, "no_shift", diagnoses=("precision_overflow",)))
    s.append(Student("s14", "folder", FORBIDDEN, "forbidden"))
    s.append(Student("s15", "folder", RAISES, "raises"))
    s.append(Student("s16", "folder", SYNTAX_ERROR, "syntax"))
    s.append(Student("s17", "folder", STUB, "stub", answers=None))
    s.append(Student("s18", "notebook", CORRECT_B))
    s.append(Student("s19", "notebook", WRONG_AXIS, "wrong_axis", diagnoses=("normalize_wrong_axis",)))
    s.append(Student("s20", "zip", CORRECT_C))
    s.append(Student("s21", "zip", SQUARES, "squares", answers=ANSWERS_HALF, diagnoses=("double_square",)))
    s.append(Student("s22", "folder", DISGUISED_A))  # a disguised copy of s01/s02 (CORRECT_A)
    s.append(Student("s23", "folder", CORRECT_C))  # same files as s05: an identical submission
    s.append(Student("s24", "folder", CORRECT_B, submitted_at=ONE_DAY_LATE, late_days=1))
    s.append(Student("s25", "zip", WRONG_AXIS, "wrong_axis", submitted_at=ONE_DAY_LATE, late_days=1,
                     diagnoses=("normalize_wrong_axis",)))
    s.append(Student("s26", "folder", CORRECT_C, answers=ANSWERS_HALF, submitted_at=FOUR_DAYS_LATE,
                     late_days=4))
    s.append(Student("s27", "folder", REFERENCE))  # the reference, verbatim
    s.append(Student("s28", "invalid_notebook"))
    s.append(Student("s29", "bad_zip"))
    s.append(Student("s30", "folder", NO_SHIFT, "no_shift", answers=ANSWERS_HALF, submitted_at=None,
                     diagnoses=("precision_overflow",)))
    s.append(Student("s31", "notebook", NO_SHIFT, "no_shift", diagnoses=("precision_overflow",)))
    s.append(Student("s32", "folder", RAISES, "raises", answers=None))
    return s


STUDENTS = _students()
BY_ID = {s.id: s for s in STUDENTS}
ROSTER_ONLY = ("z98", "z99")  # on the roster, never submitted


def notebook(code: str) -> str:
    cells = [{"cell_type": "markdown", "id": "title", "metadata": {}, "source": "# My work"}]
    for number, chunk in enumerate(code.split("\n\n\ndef ")):
        source = chunk if chunk.startswith(('"""', "import")) else "def " + chunk
        cells.append({"cell_type": "code", "id": f"code{number}", "metadata": {}, "execution_count": None,
                      "outputs": [], "source": source})
    cells.append({"cell_type": "code", "id": "play", "metadata": {}, "execution_count": None, "outputs": [],
                  "source": "print(double(torch.ones(2)))\n%timeit double(torch.ones(2))"})
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def write_student(folder: Path, student: Student) -> Path:
    files = {"mini.py": student.code}
    if student.answers is not None:
        files["answers.toml"] = student.answers
    if student.form == "folder":
        path = folder / student.id
        path.mkdir()
        for name, text in files.items():
            (path / name).write_text(text)
    elif student.form == "zip":
        path = folder / f"{student.id}.zip"
        with zipfile.ZipFile(path, "w") as archive:
            for name, text in files.items():
                archive.writestr(f"{student.id}-work/{name}", text)
    elif student.form == "notebook":
        path = folder / f"{student.id}.ipynb"
        path.write_text(notebook(student.code))
    elif student.form == "invalid_notebook":
        path = folder / f"{student.id}.ipynb"
        path.write_text('{"cells": [ this is not json')
    elif student.form == "bad_zip":
        path = folder / f"{student.id}.zip"
        path.write_bytes(b"PK\x03\x04 truncated, not really a zip")
    else:
        raise ValueError(student.form)
    return path


def build_class(root: Path, students: list[Student] = STUDENTS) -> tuple[Path, Path]:
    """(course root, submissions folder)."""
    course = root / "course"
    copy_mini_course(course)
    submissions = root / "submissions"
    submissions.mkdir()
    for student in students:
        write_student(submissions, student)
    lines = ["student,submitted_at"] + [f"{s.id},{s.submitted_at}" for s in students if s.submitted_at]
    (submissions / "timestamps.csv").write_text("\n".join(lines) + "\n")
    (submissions / "notes.txt").write_text("not a submission")
    return course, submissions


def write_roster(path: Path, students: list[Student] = STUDENTS) -> Path:
    rows = ["id,name,email"] + [f"{s.id},Student {s.id[1:]},{s.id}@example.edu" for s in students]
    rows += [f"{z},Absent {z},{z}@example.edu" for z in ROSTER_ONLY]
    path.write_text("\n".join(rows) + "\n")
    return path


def grade_or_exit(job, submission=None, *, killer: str, started: str, render_report: bool = False):
    """A batch job for the executor tests (a pool worker's or a Ray actor's): the killer's job
    ends its process (os._exit) once a neighbour's grading has started; every other job is
    graded for real (grader.pipeline.jobs.run_job)."""
    from grader.pipeline.jobs import run_job

    if job.student == killer:
        deadline = time.monotonic() + 600  # a neighbour starts within minutes even on a busy machine
        while not any(Path(started).iterdir()) and time.monotonic() < deadline:
            time.sleep(0.05)
        os._exit(70)
    (Path(started) / job.student).touch()
    return run_job(job, submission, render_report=render_report)

