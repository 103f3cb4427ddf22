"""Where things live: the course root, its assignments, references and storage."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from grader.core.compat import tomllib
from grader.core.errors import CourseNotFound, GraderError, ManifestError, UnknownAssignment
from grader.core.student_ids import check_student_id

ENGINE_ROOT = Path(__file__).resolve().parents[2]  # where grader/, templates/ and pyproject.toml live
COURSE_ENV = "GRADE_COURSE"
GRADEBOOK_ENV = "GRADE_GRADEBOOK"
MANIFEST_FILE = "assignment.toml"
INSTALLED_ORIGIN = "the course installed with the grader"


# The folder of the reference kernels, imported by name by the trusted side: a name no installed
# package uses (transformers brings one called `kernels`).
KERNELS_PACKAGE = "course_kernels"


@dataclass(frozen=True)
class Course:
    """A course root: the folder that holds `assignments/` (and, for staff, `reference/`).

    Or, when `bundle` is an assignment id, a student bundle unzipped on its own
    (what `grade release` ships): `root` is then that assignment's folder itself,
    holding its manifest, stubs and public tests, and no reference. `origin` says
    how the course was found, for the line `grade check` prints first."""

    root: Path
    bundle: str | None = None
    origin: str = field(default="", compare=False)

    @property
    def assignments_dir(self) -> Path:
        return self.root.parent if self.bundle else self.root / "assignments"

    @property
    def reference_dir(self) -> Path:
        return self.root / "reference"

    @property
    def kernels_dir(self) -> Path:
        """The instructor's reference Triton kernels (`course_kernels/`, an importable package)."""
        return self.root / KERNELS_PACKAGE

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

    def describe(self) -> str:
        """What this course is and how it was found, in words (the first line of `grade check`)."""
        what = f"the unzipped bundle {self.root}" if self.bundle else f"the course {self.root}"
        return f"{what} ({self.origin})" if self.origin else what

    def default_assignment(self, assignment_id: str | None) -> str:
        """`assignment_id`, or the only assignment there is (a bundle has one); else UnknownAssignment."""
        if assignment_id is not None:
            return assignment_id
        known = self.assignment_ids()
        if len(known) == 1:
            return known[0]
        raise UnknownAssignment(f"name the assignment ({', '.join(known) or 'none found'} in {self.root})")

    def assignment_ids(self) -> list[str]:
        if self.bundle:
            return [self.bundle]
        if not self.assignments_dir.is_dir():
            return []
        return sorted(
            p.name for p in self.assignments_dir.iterdir() if (p / "assignment.toml").is_file()
        )

    def assignment_dir(self, assignment_id: str) -> Path:
        if self.bundle:
            if assignment_id != self.bundle:
                raise UnknownAssignment(f"unknown assignment {assignment_id!r}: {self.root} is the student "
                                        f"bundle of {self.bundle} (run grade check {self.bundle}, or go to "
                                        f"the folder of {assignment_id})")
            return self.root
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


def bundle_id(folder: Path) -> str | None:
    """The assignment id when `folder` is an unzipped student bundle, else None.

    A bundle is a folder holding `assignment.toml` that is not one of a course's
    `assignments/<id>/` folders (those belong to the course around them)."""
    manifest = folder / MANIFEST_FILE
    if folder.parent.name == "assignments" or not manifest.is_file():
        return None
    try:
        assignment_id = tomllib.loads(manifest.read_text(encoding="utf-8")).get("id")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ManifestError(f"{manifest}: cannot be read as a manifest ({exc})") from exc
    if not isinstance(assignment_id, str) or not assignment_id:
        raise ManifestError(f"{manifest}: has no assignment id (id = \"...\")")
    return assignment_id


def course_at(folder: Path, origin: str) -> Course | None:
    """The course (or student bundle) whose root is `folder`, or None."""
    if (folder / "assignments").is_dir():
        return Course(folder, origin=origin)
    assignment_id = bundle_id(folder)
    return Course(folder, bundle=assignment_id, origin=origin) if assignment_id else None


def find_course(explicit: str | os.PathLike | None = None, start: Path | None = None) -> Course:
    """`--course DIR`, else `$GRADE_COURSE`, else the nearest folder at or above the current one
    that holds `assignments/` or is an unzipped student bundle, else the course installed with
    the grader (if any). The nearest wins, so a bundle inside a course is graded as itself."""
    for value, name in ((explicit, "--course"), (os.environ.get(COURSE_ENV), f"${COURSE_ENV}")):
        if value:
            root = Path(value).resolve()
            found = course_at(root, f"{name} {root}")
            if found is None:
                raise CourseNotFound(f"{root} ({name}) has no assignments/ folder and is no unzipped "
                                     f"assignment bundle (no {MANIFEST_FILE})")
            return found
    here = (start or Path.cwd()).resolve()
    for candidate in (here, *here.parents):
        found = course_at(candidate, "around the current folder")
        if found is not None:
            return found
    # An installed grader still knows the course it was shipped with (named as such when used).
    if (ENGINE_ROOT / "assignments").is_dir():
        return Course(ENGINE_ROOT, origin=f"{INSTALLED_ORIGIN}: no course or bundle around {here}")
    raise CourseNotFound("no course found: pass --course DIR or set GRADE_COURSE, or run this inside "
                         "a course or an unzipped assignment bundle")


def refuse_another_copy(course: Course, module_files: tuple[str, ...], workspace: str | os.PathLike | None,
                        here: Path | None = None) -> None:
    """Refuse to check the installed course's copy of an assignment from a folder holding its files.

    Without `--workspace`, `grade check` checks the assignment's folder in the course it found.
    When that course is only the one installed with the grader (nothing around the current
    folder) and the current folder holds the assignment's own files, those are surely the files
    meant: checking another copy would report a score for files nobody is looking at."""
    here = (here or Path.cwd()).resolve()
    if workspace is not None or not course.origin.startswith(INSTALLED_ORIGIN):
        return
    present = [name for name in module_files if (here / name).is_file()]
    if present:
        raise GraderError(f"{here} holds {', '.join(present)}, but no course or unzipped bundle is around it, so "
                          f"the copy in {course.root} would be checked instead; pass --workspace . to check "
                          f"the files here")


def owner_of_tests(test_file: Path) -> tuple[Course, str, bool] | None:
    """(course, assignment id, hidden?) for a test file under a course's `assignments/<id>/` or
    `reference/<id>/`, or under an unzipped student bundle's folder; None elsewhere."""
    for folder in Path(test_file).resolve().parents:
        if folder.parent.name in ("assignments", "reference"):
            course = Course(folder.parent.parent)
            if (course.assignments_dir / folder.name / MANIFEST_FILE).is_file():
                return course, folder.name, folder.parent.name == "reference"
        try:
            assignment_id = bundle_id(folder)
        except ManifestError:
            return None
        if assignment_id:
            return Course(folder, bundle=assignment_id), assignment_id, False
    return None
