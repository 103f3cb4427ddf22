"""The reference side of an assignment, imported into the trusted process.

Hidden tests and mutants import `reference.<id>.<module>` (and timing tests
`kernels...`) by name, so while a course is graded its root must be on the
import path. `course_imports(root)` puts it there for the duration and takes it
off afterwards; a `reference` or `kernels` package of another course found in
sys.modules is dropped first (one process may grade several courses: the
grader's own tests do), while this course's stay cached, so a pool worker
imports the reference once for all the students it grades.

`load_reference` gives the reference functions (with a kernel contract, its
launchers bound to the reference's kernels) and the misconception catalogue.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Iterator
from pathlib import Path

from grader.core.assignment import Assignment
from grader.harness.catalogue import Mutant, load_mutants
from grader.harness.contract import load_launchers

COURSE_PACKAGES = ("reference", "kernels")


def _drop_other_course(root: Path) -> None:
    for package in COURSE_PACKAGES:
        loaded = sys.modules.get(package)
        folder = str((root / package).resolve())
        if loaded is None or folder in [str(Path(p).resolve()) for p in getattr(loaded, "__path__", [])]:
            continue
        for name in [n for n in sys.modules if n == package or n.startswith(package + ".")]:
            del sys.modules[name]


@contextlib.contextmanager
def course_imports(course_root: Path) -> Iterator[None]:
    """While inside: `import reference...` and `import kernels...` mean this course's folders."""
    root = str(Path(course_root).resolve())
    _drop_other_course(Path(root))
    added = root not in sys.path
    if added:
        sys.path.insert(0, root)
    try:
        yield
    finally:
        if added and root in sys.path:
            sys.path.remove(root)


def reference_functions(assignment: Assignment) -> dict:
    """The trusted reference functions of one assignment (name → function), imported here."""
    if not assignment.has_reference:
        return {}
    functions: dict = {}
    with course_imports(assignment.course.root):
        for filename in assignment.manifest.files:
            module = importlib.import_module(f"reference.{assignment.id}.{Path(filename).stem}")
            functions.update({k: v for k, v in vars(module).items() if callable(v)})
    return functions


def load_reference(assignment: Assignment) -> tuple[dict, list[Mutant]]:
    """The assignment's trusted reference functions and its misconception catalogue.

    With a kernel contract, the contract's launchers are among the functions, bound to the
    reference's kernels (grader.harness.contract)."""
    functions = reference_functions(assignment)
    if not functions:
        return {}, []
    with course_imports(assignment.course.root):
        contract = assignment.manifest.contract
        if contract is not None:
            kernels = importlib.import_module(f"reference.{assignment.id}.{Path(contract.file).stem}")
            functions.update(load_launchers(contract, assignment.contract_module, kernels))
        return functions, load_mutants(f"reference.{assignment.id}.mutants")
