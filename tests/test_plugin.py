"""The pytest plugin's in-process mode (grader/harness/pytest_plugin.py): plain `pytest`,
in a child process, as students and authors run it.

* `cd assignments/assignment1 && pytest`: the public tests import the stubs next to
  them, and every test fails saying what to write;
* `pytest reference/assignment1/tests`: the hidden tests import the reference, and pass;
* `--grade-workspace DIR` (and GRADE_WORKSPACE) points either suite at another folder:
  a mutant fails its own task's tests, named; the reference passes the public tests;
* `--grade-seed` is the seed printed in the header; a test outside a course is refused.

The four runs start together (they spend most of their time importing torch) and
report through --junitxml; the tests below read those reports.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests import content_harness as harness
from tests.conftest import ROOT, assignment_of

ASSIGNMENT = ROOT / "assignments" / "assignment1"
REFERENCE = ROOT / "reference" / "assignment1"
MUTANT_ID = "softmax_first_axis"
OUTSIDE = '''import pytest


@pytest.mark.task("softmax")
def test_outside_a_course(check):
    check.call("softmax", 1)
'''


def _mutant():
    from grader.harness.reference import load_reference

    # this course's reference, whatever ran before
    return next(m for m in load_reference(assignment_of(ROOT, "assignment1"))[1] if m.id == MUTANT_ID)


def _cases(xml: Path) -> dict[str, tuple[str, str]]:
    """{test name: (outcome, message)} from a junit report."""
    cases = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        outcome, text = "passed", ""
        for kind in ("failure", "error", "skipped"):
            found = case.find(kind)
            if found is not None:
                outcome, text = kind, f"{found.get('message', '')}\n{found.text or ''}"
        cases[f"{case.get('classname')}::{case.get('name')}"] = (outcome, text)
    return cases


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, dict]:
    folder = tmp_path_factory.mktemp("plugin")
    mutant = harness.mutant_workspace(folder / "mutant", "assignment1", _mutant())
    outside = folder / "elsewhere" / "test_elsewhere.py"
    outside.parent.mkdir()
    outside.write_text(OUTSIDE)
    plain = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "junit_family=xunit1"]
    env = {k: v for k, v in os.environ.items() if k not in ("GRADE_WORKSPACE", "GRADE_SEED")}
    commands = {  # name → (folder to run in, arguments, extra environment)
        "stubs": (ASSIGNMENT, [], {}),
        "reference": (ROOT, [str(REFERENCE / "tests")], {}),
        "mutant": (ROOT, [str(REFERENCE / "tests"), str(outside), "--grade-workspace", str(mutant),
                          "--grade-seed", "1234"], {}),
        "environment": (ROOT, [str(ASSIGNMENT / "tests")], {"GRADE_WORKSPACE": str(REFERENCE)}),
    }
    children = {name: subprocess.Popen([*plain, *args, "--junitxml", str(folder / f"{name}.xml")], cwd=cwd,
                                       env={**env, **extra}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                       text=True)
                for name, (cwd, args, extra) in commands.items()}
    results = {}
    for name, child in children.items():
        output, _ = child.communicate(timeout=600)
        xml = folder / f"{name}.xml"
        assert xml.is_file(), output[-3000:]
        results[name] = {"code": child.returncode, "output": output, "cases": _cases(xml)}
    return results


@pytest.mark.slow
def test_public_tests_run_on_the_stubs_next_to_them(runs):
    run = runs["stubs"]
    assert run["code"] == pytest.ExitCode.TESTS_FAILED, run["output"][-2000:]
    assert len(run["cases"]) >= 5
    for name, (outcome, text) in run["cases"].items():
        assert outcome == "failure" and "is not implemented yet" in text and "§" in text, (name, text)
    # a fresh seed, printed so that a failure can be rerun with the same inputs
    assert re.search(r"grade: input seed (\d+) \(the same inputs again: --grade-seed \1\)", run["output"])


@pytest.mark.slow
def test_hidden_tests_run_on_the_reference_next_to_them(runs):
    run = runs["reference"]
    assert run["code"] == pytest.ExitCode.OK, run["output"][-3000:]
    assert len(run["cases"]) > 20
    assert {outcome for outcome, _ in run["cases"].values()} == {"passed"}


@pytest.mark.slow
def test_grade_workspace_points_the_hidden_tests_at_another_folder(runs):
    run = runs["mutant"]
    assert run["code"] == pytest.ExitCode.TESTS_FAILED, run["output"][-3000:]
    assert "grade: input seed 1234" in run["output"]
    hidden = {name: v for name, v in run["cases"].items() if not name.endswith("::test_outside_a_course")}
    failed = {name: text for name, (outcome, text) in hidden.items() if outcome != "passed"}
    assert failed, "the mutant passes every hidden test"
    assert all(".test_softmax::" in name for name in failed), sorted(failed)  # its own task only
    assert any(f"Likely cause: {_mutant().title}" in text for text in failed.values()), failed
    passed = [name for name, (outcome, _) in hidden.items() if outcome == "passed"]
    assert any(".test_scaled_dot_product_attention::" in name for name in passed)


@pytest.mark.slow
def test_a_test_outside_a_course_is_refused(runs):
    ((name, (outcome, text)),) = [(n, v) for n, v in runs["mutant"]["cases"].items()
                                  if n.endswith("::test_outside_a_course")]
    assert outcome == "error", (name, text)
    assert "is not inside assignments/<id>/ or reference/<id>/ of a course" in text


@pytest.mark.slow
def test_grade_workspace_from_the_environment(runs):
    run = runs["environment"]
    assert run["code"] == pytest.ExitCode.OK, run["output"][-3000:]
    assert run["cases"] and {outcome for outcome, _ in run["cases"].values()} == {"passed"}
