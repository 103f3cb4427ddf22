"""The reference side of an assignment, imported into the trusted process.

Hidden tests and mutants import `reference.<id>.<module>` (and timing tests
`course_kernels...`) by name, so while a course is graded its root must be on the
import path. `course_imports(root)` puts it there for the duration and takes it
off afterwards; a `reference` or `course_kernels` package of another course found in
sys.modules is set aside first and bound again on exit (one process may grade several courses: the
grader's own tests do), while this course's stay cached, so a pool worker
imports the reference once for all the students it grades.

`load_reference` gives the reference functions (with a kernel contract, its
launchers bound to the reference's kernels) and the misconception catalogue;
`load_dependencies` how a task's function is computed from other tasks' functions.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Iterator
from pathlib import Path

from grader.core.assignment import Assignment
from grader.harness.catalogue import Composition, Mutant, load_compositions, load_mutants
from grader.harness.contract import load_launchers

COURSE_PACKAGES = ("reference", "course_kernels")

# Each course's own modules of COURSE_PACKAGES, kept between its gradings (root → name → module):
# a pool worker imports a course's reference once for all the students it grades, and no course's
# modules stay bound under those names once its `course_imports` has ended.
_CACHED: dict[str, dict[str, object]] = {}


def _package_modules(package: str) -> dict[str, object]:
    return {n: m for n, m in sys.modules.items() if n == package or n.startswith(package + ".")}


def _belongs_to(module: object, root: Path) -> bool:
    folders = [Path(p).resolve() for p in getattr(module, "__path__", None) or []]
    origin = getattr(module, "__file__", None)
    if origin:
        folders.append(Path(origin).resolve().parent)
    return any(folder == root or root in folder.parents for folder in folders)


@contextlib.contextmanager
def course_imports(course_root: Path) -> Iterator[None]:
    """While inside: `import reference...` and `import course_kernels...` mean this course's folders.

    On exit the import state is as it was on entry: sys.path, and whatever `reference` and
    `course_kernels` meant before (another course's, or nothing). This course's modules are kept
    aside and bound again on the next entry, so they are imported once per process."""
    root = Path(course_root).resolve()
    key = str(root)
    before: dict[str, object] = {}
    for package in COURSE_PACKAGES:
        loaded = sys.modules.get(package)
        if loaded is not None and not _belongs_to(loaded, root):
            for name, module in _package_modules(package).items():
                before[name] = module
                del sys.modules[name]
    kept_outside = {package: package in sys.modules for package in COURSE_PACKAGES}
    for name, module in _CACHED.get(key, {}).items():
        sys.modules.setdefault(name, module)
    added = key not in sys.path
    if added:
        sys.path.insert(0, key)
    try:
        yield
    finally:
        if added and key in sys.path:
            sys.path.remove(key)
        cache = _CACHED.setdefault(key, {})
        for package in COURSE_PACKAGES:
            mine = {n: m for n, m in _package_modules(package).items() if _belongs_to(m, root)}
            cache.update(mine)
            if not kept_outside[package]:  # bound on entry for this context only: unbind
                for name in mine:
                    sys.modules.pop(name, None)
        sys.modules.update(before)


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


def load_dependencies(assignment: Assignment) -> list[Composition]:
    """How the assignment's task functions are computed from other tasks' functions
    (`reference/<id>/dependencies.py`; none without that file)."""
    if not assignment.has_reference:
        return []
    with course_imports(assignment.course.root):
        return load_compositions(f"reference.{assignment.id}.dependencies")


def stub_sources(assignment: Assignment) -> dict[str, str]:
    """The handout's kernel file as students receive it (filename → text): a contract kernel still equal to
    its stub is not written yet. Empty without a kernel contract or without the file. Only for a course
    checkout's official grading: in a student's bundle that folder holds the student's own work."""
    contract = assignment.manifest.contract
    path = assignment.folder / contract.file if contract else None
    if path is None or not path.is_file():
        return {}
    return {contract.file: path.read_text(encoding="utf-8")}
