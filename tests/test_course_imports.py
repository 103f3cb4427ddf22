"""`course_imports` leaves the import state as it found it: a temporary course's `reference`
package never stays bound under that name for the tests (or gradings) that come after it."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from grader.harness.reference import course_imports

ROOT = Path(__file__).resolve().parent.parent


def test_a_temporary_course_is_unbound_on_exit_and_the_earlier_one_bound_again(mini_course: Path):
    real = importlib.import_module("reference.assignment1.mutants")
    with course_imports(mini_course):
        mini = importlib.import_module("reference")
        assert Path(mini.__path__[0]).resolve() == (mini_course / "reference").resolve()
        assert "reference.assignment1" not in sys.modules
    assert importlib.import_module("reference.assignment1.mutants") is real
    assert str(mini_course.resolve()) not in sys.path


def test_nothing_bound_before_means_nothing_bound_after(mini_course: Path):
    saved = {n: m for n, m in sys.modules.items() if n == "reference" or n.startswith("reference.")}
    for name in saved:
        del sys.modules[name]
    try:
        with course_imports(mini_course):
            first = importlib.import_module("reference")
        assert "reference" not in sys.modules
        with course_imports(mini_course):  # the course's own modules come back, not imported again
            assert importlib.import_module("reference") is first
        assert "reference" not in sys.modules
    finally:
        sys.modules.update(saved)


@pytest.mark.slow
def test_authoring_then_the_content_tests_in_one_process():
    """The order that failed: a temporary course graded in process, then a real mutant of assignment 1
    (this pair failed on the code before the fix with ModuleNotFoundError: `reference` still meant the
    temporary course). Running the two whole files took 90 s."""
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-k", "renamed_stub_parameter or scores_k_not_transposed",
         "tests/test_authoring.py", "tests/test_assignment1_content.py"],
        cwd=ROOT, capture_output=True, text=True, timeout=1500)
    assert run.returncode == 0 and "2 passed" in run.stdout, run.stdout[-3000:]
