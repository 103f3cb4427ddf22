"""Where things live: the course root, its assignments, references and storage."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from grader.errors import CourseNotFound, GraderError, UnknownAssignment
from grader.student_ids import check_student_id

COURSE_ENV = "GRADE_COURSE"
GRADEBOOK_ENV = "GRADE_GRADEBOOK"


@dataclass(frozen=True)
class Course:
    """A course root: the folder that holds `assignments/` (and, for staff, `reference/`)."""

    root: Path

    @property
    def assignments_dir(self) -> Path:
        return self.root / "assignments"

    @property
    def reference_dir(self) -> Path:
        return self.root / "reference"

    @property
    def state_dir(self) -> Path:
        return self.root / ".grade"

    @property
    def default_gradebook(self) -> Path:
        return self.state_dir / "gradebook.sqlite"

    @property
    def reports_dir(self) -> Path:
        return self.state_dir / "reports"

    def report_path(self, student_id: str, assignment_id: str) -> Path:
        """reports/STUDENT/ASSIGNMENT.html for a valid student id; never a path outside reports/."""
        check_student_id(student_id, "report for student")
        path = self.reports_dir / student_id / f"{assignment_id}.html"
        if not path.resolve().is_relative_to(self.reports_dir.resolve()):
            raise GraderError(f"the report for {student_id} would be written outside {self.reports_dir} "
                              f"(a link in that folder?); remove the link or pass --html PATH")
        return path

    @property
    def templates_dir(self) -> Path:
        local = self.root / "templates"
        return local if local.is_dir() else Path(__file__).resolve().parent.parent / "templates"

    def assignment_ids(self) -> list[str]:
        if not self.assignments_dir.is_dir():
            return []
        return sorted(
            p.name for p in self.assignments_dir.iterdir() if (p / "assignment.toml").is_file()
        )

    def assignment_dir(self, assignment_id: str) -> Path:
        path = self.assignments_dir / assignment_id
        if not (path / "assignment.toml").is_file():
            known = ", ".join(self.assignment_ids()) or "none"
            raise UnknownAssignment(f"unknown assignment {assignment_id!r} (known: {known})")
        return path

    def reference_for(self, assignment_id: str) -> Path:
        return self.reference_dir / assignment_id

    def gradebook_path(self, override: str | os.PathLike | None = None) -> Path:
        if override:
            return Path(override)
        env = os.environ.get(GRADEBOOK_ENV)
        return Path(env) if env else self.default_gradebook


def find_course(explicit: str | os.PathLike | None = None, start: Path | None = None) -> Course:
    """`--course DIR`, else `$GRADE_COURSE`, else the nearest parent holding `assignments/`."""
    if explicit:
        root = Path(explicit).resolve()
        if not (root / "assignments").is_dir():
            raise CourseNotFound(f"{root} has no assignments/ folder")
        return Course(root)
    env = os.environ.get(COURSE_ENV)
    if env:
        return find_course(env)
    here = (start or Path.cwd()).resolve()
    for candidate in (here, *here.parents):
        if (candidate / "assignments").is_dir():
            return Course(candidate)
    # An installed grader still knows the course it was shipped with.
    packaged = Path(__file__).resolve().parent.parent
    if (packaged / "assignments").is_dir():
        return Course(packaged)
    raise CourseNotFound("no course found: pass --course DIR or set GRADE_COURSE")
