"""What graded an entry: one fingerprint of everything that decides its points.

A sha256 over the grader's version, the assignment's manifest, quiz questions
and kernel contract module, every file under `reference/<id>/` (hidden tests,
reference solution, the misconception catalogue, the quiz key) and, for an
assignment with a timing task, the reference kernels under `course_kernels/`, each
file named by its path relative to the course root, in path order. It is
stored with every gradebook record, so `grade batch` can tell an entry graded
by what is there now from one graded before a task, a test or a reference
changed, and grade it again.

Caches and staff-only material that decides no points (grader.core.files'
skipped parts, `similarity_sources/` and other hidden folders) are left out, so
grading itself (which imports the reference) never changes the fingerprint.
"""

from __future__ import annotations

from pathlib import Path

from grader import __version__
from grader.core.course import Course
from grader.core.files import tree_digest, tree_files
from grader.core.manifest import Manifest

FINGERPRINT_SCHEME = "v2"  # bump when what goes into the fingerprint changes (v2: the contract module)
STAFF_ONLY = frozenset({"similarity_sources"})


def _graded_files(folder: Path, root: Path) -> dict[str, Path]:
    return {name: path for name, path in tree_files(folder, root).items()
            if not any(part in STAFF_ONLY or part.startswith(".") for part in Path(name).parts)}


def grading_fingerprint(course: Course, manifest: Manifest) -> str:
    """sha256 (hex) of the grader version and the files that grade `manifest`'s assignment in `course`."""
    assignment_dir = course.assignment_dir(manifest.id)
    names = ["assignment.toml", "quiz.toml"] + ([manifest.contract.module] if manifest.contract else [])
    files = {f"assignments/{manifest.id}/{name}": assignment_dir / name for name in names
             if (assignment_dir / name).is_file()}
    files.update(_graded_files(course.reference_for(manifest.id), course.root))
    if manifest.has_timing_task:
        files.update(_graded_files(course.kernels_dir, course.root))
    return tree_digest(files, f"grader {__version__}\0fingerprint {FINGERPRINT_SCHEME}\n")
