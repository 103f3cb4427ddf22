"""Where things live: the course root, its assignments, references and storage."""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from grader.core.errors import CourseNotFound, GraderError, UnknownAssignment
from grader.core.student_ids import check_student_id

ENGINE_ROOT = Path(__file__).resolve().parents[2]  # where grader/, templates/ and pyproject.toml live
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
        return local if local.is_dir() else ENGINE_ROOT / "templates"

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
    packaged = ENGINE_ROOT
    if (packaged / "assignments").is_dir():
        return Course(packaged)
    raise CourseNotFound("no course found: pass --course DIR or set GRADE_COURSE")


def use_course_reference(course_root: Path) -> None:
    """Make `import reference...` (and `kernels`) mean this course's folders, in this trusted process.

    Hidden tests and mutants import `reference.<id>.<module>` by name. One process
    grades one course at a time, but it may grade several in its life (the
    grader's own tests do): a `reference` package from another course is dropped
    from sys.modules, with everything under it, before this one is imported."""
    folder = str((course_root / "reference").resolve())
    loaded = sys.modules.get("reference")
    if loaded is not None and folder not in [str(Path(p).resolve()) for p in getattr(loaded, "__path__", [])]:
        for name in [n for n in sys.modules if n == "reference" or n.startswith("reference.")]:
            del sys.modules[name]
    root = str(course_root.resolve())
    if root in sys.path:
        sys.path.remove(root)
    sys.path.insert(0, root)


def reference_functions(course_root: Path, assignment_id: str, files: tuple[str, ...]) -> dict:
    """The trusted reference functions of one assignment (name → function), imported here."""
    if not (course_root / "reference" / assignment_id).is_dir():
        return {}
    use_course_reference(course_root)
    functions: dict = {}
    for filename in files:
        module = importlib.import_module(f"reference.{assignment_id}.{Path(filename).stem}")
        functions.update({k: v for k, v in vars(module).items() if callable(v)})
    return functions
