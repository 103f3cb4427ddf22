"""Every kind of broken submission gets a correct, explained record for the
affected tests only; the other tests still run and the grader never crashes."""

from __future__ import annotations

import json
import shutil

import pytest

from grader.core.course import Course
from tests.conftest import FAULTS, MINI_COURSE, copy_mini_course, grade_workspace, shorten_call_timeout, write_results

# fault → (task that must fail, failure kind, words the message must contain, tasks that must pass)
EXPECTED = {
    "timeout": ("double", "timeout", "did not finish", ["normalize", "quiz"]),
    "segfault": ("double", "crashed", "SIGSEGV", ["normalize", "quiz"]),
    "os_exit": ("double", "crashed", "exited with code 3", ["normalize", "quiz"]),
    "sys_exit": ("double", "raised", "sys.exit(1)", ["normalize", "quiz"]),
    "import_error": ("double", "import_failed", "broken at import time", ["quiz"]),
    "syntax_error": ("normalize", "import_failed", "SyntaxError", ["quiz"]),
    "missing_function": ("normalize", "missing", "no function named normalize", ["double", "quiz"]),
    "wrong_type": ("double", "unsupported", "numpy.ndarray", ["normalize", "quiz"]),
    "wrong_shape": ("double", "wrong", "shape ()", ["normalize", "quiz"]),
    "nan_output": ("normalize", "degenerate", "NaN", ["double", "quiz"]),
    "print_flood": ("double", "raised", "output limit", ["normalize", "quiz"]),
    "forbidden_alias": ("normalize", "forbidden", "forbidden API", ["double", "quiz"]),
    "forbidden_runtime": ("normalize", "forbidden", "forbidden API", ["double", "quiz"]),
    "wrong_axis": ("normalize", "wrong", "wrong axis", ["double", "quiz"]),
    "in_place": ("double", "wrong", "in place", ["normalize", "quiz"]),
    "fake_results": ("normalize", "degenerate", "argument 1 unchanged", ["double", "quiz"]),
    "degenerate_zeros": ("double", "degenerate", "all zeros", ["normalize", "quiz"]),
    "degenerate_ones": ("normalize", "degenerate", "all ones", ["double", "quiz"]),
    "degenerate_constant": ("double", "degenerate", "the same number, 0.25, everywhere", ["normalize", "quiz"]),
    "degenerate_input": ("normalize", "degenerate", "argument 1 unchanged", ["double", "quiz"]),
}


@pytest.fixture(scope="module")
def course() -> Course:
    return Course(MINI_COURSE)


@pytest.mark.sandbox
@pytest.mark.parametrize("fault", sorted(EXPECTED))
def test_fault_is_recorded_and_explained(course: Course, fault: str, tmp_path) -> None:
    failing_task, kind, words, passing = EXPECTED[fault]
    if fault == "timeout":  # hangs by design: a copy of the course with a shorter call timeout
        course = Course(copy_mini_course(tmp_path / "course"))
        shorten_call_timeout(course.root)
    result = grade_workspace(course, "mini", FAULTS / fault, student=fault)
    failing = [o for o in result.outcomes if o.task == failing_task and o.status == "failed"]
    tasks = {t.task_id: t for t in result.score.tasks}
    if fault == "print_flood":  # the first call hits the cap; later output is dropped, not fatal
        assert failing and tasks[failing_task].earned < tasks[failing_task].points
    else:
        assert len(failing) == len([o for o in result.outcomes if o.task == failing_task])
        assert tasks[failing_task].earned == 0
    assert {o.kind for o in failing} == {kind}
    assert any(words in o.message for o in failing), [o.message for o in failing]
    for task in passing:
        assert tasks[task].earned == tasks[task].points, (task, tasks[task])
    # The grader's own results file is the one that counts, whatever the code wrote.
    out = write_results(result, tmp_path / "results.json")
    data = json.loads(out.read_text())
    assert data["score"] == result.score.total
    assert sum(t["score"] for t in data["tests"]) == pytest.approx(result.score.total, abs=1e-3)


@pytest.mark.sandbox
def test_fake_results_file_never_reaches_the_grader(course: Course, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = grade_workspace(course, "mini", FAULTS / "fake_results")
    assert result.score.total == 60.0
    assert not (tmp_path / "results.json").exists()
    assert not list((FAULTS / "fake_results").glob("results.json"))


@pytest.mark.sandbox
def test_forbidden_alias_is_found_statically(course: Course) -> None:
    result = grade_workspace(course, "mini", FAULTS / "forbidden_alias")
    assert [(f.task, f.group) for f in result.findings] == [("normalize", "softmax")]
    assert next(t for t in result.score.tasks if t.task_id == "normalize").status == "forbidden"


@pytest.mark.sandbox
def test_diagnosis_names_the_mutant(course: Course) -> None:
    result = grade_workspace(course, "mini", FAULTS / "wrong_axis")
    diagnosed = {(o.diagnosis or {}).get("id") for o in result.outcomes if o.task == "normalize"}
    assert diagnosed == {"normalize_wrong_axis"}


@pytest.mark.parametrize("fault, records", [
    ("degenerate_zeros", {"double": (0.0, 0, 2, "graded"), "normalize": (40.0, 3, 0, "graded")}),
    ("degenerate_ones", {"double": (40.0, 2, 0, "graded"), "normalize": (0.0, 0, 3, "graded")}),
    ("degenerate_constant", {"double": (0.0, 0, 2, "graded"), "normalize": (40.0, 3, 0, "graded")}),
    ("degenerate_input", {"double": (40.0, 2, 0, "graded"), "normalize": (0.0, 0, 3, "graded")}),
    ("nan_output", {"double": (40.0, 2, 0, "graded"), "normalize": (0.0, 0, 3, "graded")}),
    ("reference", {"double": (40.0, 2, 0, "graded"), "normalize": (40.0, 3, 0, "graded")}),
])
@pytest.mark.sandbox
def test_degenerate_outputs_earn_nothing_and_the_reference_keeps_full_marks(course: Course, fault, records,
                                                                              tmp_path) -> None:
    if fault == "reference":
        workspace = tmp_path / "reference"
        shutil.copytree(MINI_COURSE / "reference" / "mini", workspace)
        shutil.copy(FAULTS / "nan_output" / "answers.toml", workspace)
    else:
        workspace = FAULTS / fault
    result = grade_workspace(course, "mini", workspace)
    got = {t.task_id: (t.earned, t.passed, t.failed, t.status) for t in result.score.tasks}
    assert got == {**records, "quiz": (20.0, 2, 0, "graded")}
    assert result.findings == ()
    for outcome in result.outcomes:
        if outcome.status == "failed":
            assert outcome.kind == "degenerate" and "§" in outcome.message, outcome
