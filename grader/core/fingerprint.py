"""What graded an entry: one fingerprint of everything that decides its points.

A sha256 over the grader's version, the assignment's manifest and quiz
questions, every file under `reference/<id>/` (hidden tests, reference
solution, the misconception catalogue, the quiz key) and, for an assignment
with a timing task, the reference kernels under `kernels/`, each file named
by its path relative to the course root, in path order. It is stored with
every gradebook record, so `grade batch` can tell an entry graded by what is
there now from one graded before a task, a test or a reference changed, and
grade it again.

Caches and staff-only material that decides no points (`__pycache__`,
`similarity_sources/`) are left out, so grading itself (which imports the
reference) never changes the fingerprint.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from grader import __version__
from grader.core.course import Course
from grader.core.manifest import load_manifest

FINGERPRINT_SCHEME = "v1"  # bump when what goes into the fingerprint changes
IGNORED_PARTS = frozenset({"__pycache__", ".pytest_cache", "similarity_sources", ".ipynb_checkpoints"})
IGNORED_SUFFIXES = (".pyc", ".pyo")


def _files(folder: Path, root: Path) -> list[tuple[str, Path]]:
    if not folder.is_dir():
        return []
    found = []
    for path in folder.rglob("*"):
        relative = path.relative_to(root)
        if any(part in IGNORED_PARTS or part.startswith(".") for part in relative.parts):
            continue
        if path.is_file() and not path.name.endswith(IGNORED_SUFFIXES):
            found.append((relative.as_posix(), path))
    return found


def grading_fingerprint(course: Course, assignment_id: str) -> str:
    """sha256 (hex) of the grader version and the files that grade `assignment_id` in `course`."""
    assignment_dir = course.assignment_dir(assignment_id)
    root = course.root
    files = [(f"assignments/{assignment_id}/{name}", assignment_dir / name)
             for name in ("assignment.toml", "quiz.toml") if (assignment_dir / name).is_file()]
    files += _files(course.reference_for(assignment_id), root)
    if any(task.kind == "timing" for task in load_manifest(assignment_dir / "assignment.toml").tasks):
        files += _files(root / "kernels", root)
    digest = hashlib.sha256(f"grader {__version__}\0fingerprint {FINGERPRINT_SCHEME}\n".encode())
    for name, path in sorted(files):
        digest.update(name.encode("utf-8", "surrogateescape") + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()
