"""The student bundle on its own: `grade release` builds it, a student unzips it away from any
course, and `grade check` and `python -m pytest tests` work there on the bundle's own files.

Also: how the course is found (a bundle is recognised, the nearest wins, a check never grades
another copy silently), `grade check --json`, and `grade release` refusing a starter that is not
blank. Everything runs on temporary copies of a course, in real subprocesses, on real zips.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from class_builder import CORRECT_A, FIXTURE, STUB
from click.testing import CliRunner

from grader.cli.main import main
from grader.core.course import ENGINE_ROOT, Course, find_course, owner_of_tests
from grader.core.errors import CourseNotFound, UnknownAssignment
from grader.core.manifest import load_manifest
from grader.ship.release import pristine_problems
from tests.conftest import ROOT, copy_course, copy_mini_course

GRADE = shutil.which("grade", path=str(Path(sys.executable).parent)) or shutil.which("grade")


def run(command: list[str], cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    """A real subprocess in `cwd`, with no course named by the environment."""
    env = {k: v for k, v in os.environ.items() if k not in ("GRADE_COURSE", "GRADE_WORKSPACE", "GRADE_SEED")}
    env["COLUMNS"] = "200"  # rich wraps at the terminal width: keep each message on one line
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def course_copy(tmp_path: Path) -> Path:
    target = tmp_path / "course"
    copy_mini_course(target)
    return target


def unzipped_release(course: Path, assignment: str, tmp_path: Path) -> Path:
    """Release `assignment`, then unzip the zip in a folder with no course above it."""
    result = CliRunner().invoke(main, ["--course", str(course), "release", assignment, "--out",
                                       str(tmp_path / "release")])
    assert result.exit_code == 0, result.output
    home = tmp_path / "student"
    home.mkdir()
    with zipfile.ZipFile(tmp_path / "release" / f"{assignment}.zip") as archive:
        archive.extractall(home)
    bundle = home / assignment
    assert not any((p / "assignments").is_dir() for p in (bundle, *bundle.parents))  # nothing around it
    return bundle


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    return unzipped_release(course_copy(tmp_path), "mini", tmp_path)


# ------------------------------------------------------------------ the bundle alone
def test_the_unzipped_bundle_is_complete_and_its_readme_says_how_to_work_alone(bundle: Path):
    names = sorted(p.relative_to(bundle).as_posix() for p in bundle.rglob("*") if p.is_file())
    assert names == ["README.md", "answers.toml", "assignment.toml", "mini.py", "quiz.toml", "tests/test_public.py"]
    readme = (bundle / "README.md").read_text()
    assert "## Working from this folder" in readme
    assert "`grade check mini`" in readme and "`python -m pytest tests`" in readme
    assert "`grade check mini --json results.json`" in readme
    assert (bundle / "mini.py").read_text() == STUB


@pytest.mark.sandbox
def test_grade_check_in_the_bundle_grades_the_bundle_and_reports_the_stubs(bundle: Path):
    done = run([GRADE, "check", "mini", "--json", "results.json"], cwd=bundle)
    assert done.returncode == 1, done.stdout + done.stderr  # public tests failed: exit 1, not an error
    first = done.stdout.splitlines()[0]
    assert first == (f"checking {bundle}: the public tests of mini from the unzipped bundle {bundle} "
                     f"(around the current folder)")
    assert "double is not implemented yet (it raises NotImplementedError)" in done.stdout
    assert "normalize is not implemented yet (it raises NotImplementedError)" in done.stdout
    assert "Total: 0 / 100" in done.stdout
    data = json.loads((bundle / "results.json").read_text())
    assert data["score"] == 0
    assert [(t["name"], t.get("status"), t.get("score"), t.get("max_score"), t["visibility"])
            for t in data["tests"]] == [
        ("double · test_public::test_double_small", "failed", 0.0, 40.0, "visible"),
        ("normalize · test_public::test_normalize_rows_sum_to_one", "failed", 0.0, 40.0, "visible"),
        ("quiz · quiz::answered", None, None, None, "visible")]  # check does not mark the quiz: pending
    assert "NotImplementedError" in data["tests"][0]["output"]


@pytest.mark.sandbox
def test_grade_check_without_the_assignment_name_and_from_a_subfolder(bundle: Path):
    (bundle / "mini.py").write_text(CORRECT_A)  # the bundle's own files are what is checked
    done = run([GRADE, "check"], cwd=bundle / "tests")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(f"checking {bundle}: the public tests of mini from the unzipped bundle")
    assert "Total: 80 / 100" in done.stdout  # both code tasks; the quiz has no public test


@pytest.mark.slow
def test_plain_pytest_in_the_bundle_runs_the_public_tests(bundle: Path):
    done = run([sys.executable, "-m", "pytest", "tests", "-p", "no:cacheprovider"], cwd=bundle)
    assert done.returncode == 1, done.stdout + done.stderr
    assert re.search(r"\b2 failed\b", done.stdout), done.stdout
    assert "not implemented yet" in done.stdout
    (bundle / "mini.py").write_text(CORRECT_A)
    done = run([sys.executable, "-m", "pytest", "tests", "-p", "no:cacheprovider"], cwd=bundle)
    assert done.returncode == 0 and re.search(r"\b2 passed\b", done.stdout), done.stdout + done.stderr


@pytest.mark.sandbox
def test_a_solved_real_bundle_is_checked_not_the_installed_course(tmp_path: Path):
    """From an unzipped assignment1 bundle, check grades that bundle: its solved attention.py passes,
    where the installed course's stubs would fail."""
    course = copy_course(tmp_path / "course", ("assignments/assignment1", "reference/assignment1", "course_kernels"))
    bundle = unzipped_release(course, "assignment1", tmp_path)
    shutil.copy(ROOT / "reference" / "assignment1" / "attention.py", bundle / "attention.py")
    done = run([GRADE, "check", "assignment1"], cwd=bundle)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(f"checking {bundle}: ")
    assert re.search(r"Total: 90 / 100", done.stdout), done.stdout  # every code task; the quiz is not checked


# --------------------------------------------------------------------- finding the course
def test_find_course_recognises_a_bundle_and_the_nearest_wins(tmp_path: Path, monkeypatch):
    monkeypatch.delenv("GRADE_COURSE", raising=False)
    course = course_copy(tmp_path)
    inside = course / "assignments" / "mini" / "tests"
    assert find_course(start=inside) == Course(course)  # a course's own assignment folder is the course's
    nested = course / "mine" / "mini"  # a bundle unzipped inside a course is graded as itself
    shutil.copytree(course / "assignments" / "mini", nested)
    found = find_course(start=nested / "tests")
    assert found == Course(nested, bundle="mini") and found.assignment_dir("mini") == nested
    assert found.assignment_ids() == ["mini"] and found.default_assignment(None) == "mini"
    with pytest.raises(UnknownAssignment, match="is the student bundle of mini"):
        found.assignment_dir("assignment1")
    assert find_course(str(nested)) == Course(nested, bundle="mini")  # --course DIR may name a bundle
    monkeypatch.setenv("GRADE_COURSE", str(nested))
    assert find_course() == Course(nested, bundle="mini")
    monkeypatch.setenv("GRADE_COURSE", str(tmp_path))
    with pytest.raises(CourseNotFound, match="no assignments/ folder and is no unzipped assignment bundle"):
        find_course()


def test_tests_owner_knows_course_tests_and_bundle_tests(tmp_path: Path):
    course = course_copy(tmp_path)
    public = course / "assignments" / "mini" / "tests" / "test_public.py"
    hidden = course / "reference" / "mini" / "tests" / "test_double.py"
    assert owner_of_tests(public) == (Course(course), "mini", False)
    assert owner_of_tests(hidden) == (Course(course), "mini", True)
    loose = tmp_path / "loose" / "renamed"  # a bundle renamed by its student keeps its manifest's id
    shutil.copytree(course / "assignments" / "mini", loose)
    assert owner_of_tests(loose / "tests" / "test_public.py") == (Course(loose, bundle="mini"), "mini", False)
    assert owner_of_tests(tmp_path / "nowhere" / "test_x.py") is None


@pytest.mark.sandbox
@pytest.mark.skipif(not (ENGINE_ROOT / "assignments" / "assignment1").is_dir(),
                    reason="the installed grader carries no course")
def test_check_refuses_to_grade_the_installed_copy_of_files_that_are_here(tmp_path: Path):
    work = tmp_path / "my_work"
    work.mkdir()
    shutil.copy(ROOT / "assignments" / "assignment1" / "attention.py", work / "attention.py")
    done = run([GRADE, "check", "assignment1"], cwd=work)
    assert done.returncode == 2
    assert done.stderr.strip() == (f"Error: {work} holds attention.py, but no course or unzipped bundle is "
                                   f"around it, so the copy in {ENGINE_ROOT} would be checked instead; pass "
                                   f"--workspace . to check the files here")
    done = run([GRADE, "check", "assignment1", "--workspace", ".", "--task", "scale_scores"], cwd=work)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.startswith(f"checking {work}: the public tests of assignment1 from the course "
                                  f"{ENGINE_ROOT} (the course installed with the grader: no course or bundle "
                                  f"around {work})")


@pytest.mark.sandbox
def test_check_json_is_the_submit_format(mini_course: Path, tmp_path: Path):
    out = tmp_path / "check.json"
    result = CliRunner().invoke(main, ["--course", str(mini_course), "check", "mini", "--workspace",
                                       str(mini_course / "reference" / "mini"), "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == (f"checking {mini_course / 'reference' / 'mini'}: the public tests "
                                             f"of mini from the course {mini_course} (--course {mini_course})")
    data = json.loads(out.read_text())
    assert data["score"] == 80.0 and data["extra_data"]["mode"] == "check"
    assert [(t["number"], t.get("status"), t.get("score")) for t in data["tests"]] == [
        ("1.1", "passed", 40.0), ("2.1", "passed", 40.0), ("3.1", None, None)]
    assert data["tests"][2]["output"].startswith("**Pending** (worth 20 points, not judged here): ")
    assert {"output_format", "test_output_format", "tests", "score", "output", "extra_data"} <= set(data)


# ------------------------------------------------------------------ a blank starter only
SOLVED_STUB = '''"""Mini assignment stubs."""

import torch


def double(x: torch.Tensor) -> torch.Tensor:
    """Return 2·x, same shape and dtype (§6)."""
    doubled = x + x  # (...)
    return doubled


def normalize(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension, written by hand (§10)."""
    pass
'''


def test_release_refuses_a_solved_stub_and_answered_questions(tmp_path: Path):
    course = course_copy(tmp_path)
    (course / "assignments" / "mini" / "mini.py").write_text(SOLVED_STUB)
    (course / "assignments" / "mini" / "answers.toml").write_text('row_sum = 2\nratio = ""\n')
    result = CliRunner().invoke(main, ["--course", str(course), "release", "mini", "--out", str(tmp_path / "out")])
    assert result.exit_code == 3, result.output
    rule = "its stub must raise NotImplementedError first (or its docstring say it is given: 'Given; do not change.')"
    assert result.output == ("Error: refusing to release mini: the starter in assignments/mini/ is not blank "
                             f"(3 problem(s)): mini.py: double has a body; {rule}; mini.py: normalize does not "
                             f"raise NotImplementedError; {rule}; answers.toml: row_sum is answered; every answer "
                             f"must be blank (\"\")\n")
    assert not (tmp_path / "out").exists()


def test_pristine_problems_name_missing_stubs_and_accept_given_helpers():
    manifest = load_manifest(FIXTURE / "assignments" / "mini" / "assignment.toml")
    blank = {"mini.py": STUB.encode(), "answers.toml": b'row_sum = ""\nratio = ""\n'}
    assert pristine_problems(blank, manifest) == []
    only_double = STUB.split("def normalize")[0]
    assert pristine_problems({"mini.py": only_double.encode()}, manifest) == [
        "normalize: no stub in mini.py (a task names it)"]
    given = only_double + 'def normalize(x):\n    """Given; do not change."""\n    return x.softmax(-1)\n'
    assert pristine_problems({"mini.py": given.encode()}, manifest) == []
    assert pristine_problems({}, manifest) == ["mini.py: missing (the manifest lists it among the student's files)"]
    assert pristine_problems({"mini.py": b"def double(:\n"}, manifest) == ["mini.py: not valid Python"]
    tabled = {"mini.py": STUB.encode(), "answers.toml": b'[answers]\nrow_sum = 0\nratio = ""\n'}
    assert pristine_problems(tabled, manifest) == [
        'answers.toml: row_sum is answered; every answer must be blank ("")']
