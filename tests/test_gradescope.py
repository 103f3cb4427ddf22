"""Gradescope: results.json field by field, submission_metadata.json's dates, the bundle's
scripts run for real in an /autograder-like folder, and setup.sh failing loudly when the
sandbox is too weak.

The run_autograder tests unzip the bundle built by `grade autograder gradescope`, point
$GRADE_AUTOGRADER_HOME at a temporary folder and $GRADE_VENV at this interpreter's
environment, and run the script with bash; GRADE_NO_BWRAP=1 gives the no-namespace level
Gradescope's containers give.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import zipfile
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from class_builder import CORRECT_A, FIXTURE
from click.testing import CliRunner

from grader.cli.main import main
from grader.core.compat import UTC
from grader.core.errors import GraderError, ManifestError
from grader.core.manifest import load_manifest, parse_manifest
from grader.core.records import FAILED, PASSED, PENDING, GradeResult, TestOutcome
from grader.core.scoring import score
from grader.render.results import gradescope_results, markdown_text
from grader.ship.autograder import (
    DEFAULT_TIMEOUT_MINUTES,
    STOP_MARGIN_S,
    GradescopeDates,
    build_autograder,
    pick_workspace,
    read_metadata,
)
from tests.conftest import ROOT, assignment_of, copy_mini_course

PREFIX_BIN = Path(sys.prefix) / "bin"


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


# ------------------------------------------------------------------------ results.json
TIMED = parse_manifest({
    "id": "timed", "title": "Timed", "files": ["k.py"],
    "gradescope": {"hidden_tests": "after_published", "public_tests": "visible"},
    "tasks": [
        {"id": "forward", "points": 30, "functions": ["forward"]},
        {"id": "speed", "kind": "timing", "points": 10, "uses": ["forward"], "speed": [[1.5, 1.0], [3.0, 0.5]]},
        {"id": "backward", "points": 10, "functions": ["backward"], "bonus": True},
    ]})


def timed_result(speed: TestOutcome) -> GradeResult:
    """Outcomes in the order pytest ran the files: the bonus first, as test_backward sorts first."""
    outcomes = [
        TestOutcome(name="test_backward::test_grads", task="backward", status=PASSED, fraction=1.0),
        TestOutcome(name="test_forward::test_small", task="forward", status=PASSED, fraction=1.0),
        TestOutcome(name="test_forward::test_tail", task="forward", status=FAILED, kind="wrong",
                    message="forward: rows past the end hold [garbage](http://x) <img src=x>\nreread §24"),
        TestOutcome(name="test_public::test_shape", task="forward", status=PASSED, fraction=1.0,
                    visibility="visible"),
        speed,
    ]
    return GradeResult(assignment_id="timed", assignment_title="Timed", student="s", mode="submit",
                       score=score(TIMED, outcomes), outcomes=tuple(outcomes), findings=(),
                       submission_sha256="ab" * 32, submission_form="folder", submitted_at=None,
                       graded_at="2026-12-01T13:00:00+00:00", seed=7, isolation="process",
                       isolation_level="process+uid+landlock+seccomp+reaper", duration_s=1.25,
                       versions={"grader": "0.1.0"})


def test_results_json_orders_tests_by_the_manifest_and_leaves_pending_tests_unjudged():
    pending = TestOutcome(name="test_speed::test_large", task="speed", status=PENDING, kind="not_run",
                          message="timed on a CUDA GPU only")
    data = gradescope_results(timed_result(pending), TIMED)
    rows = [(t["number"], t["name"], t.get("score"), t.get("max_score"), t.get("status"), t["visibility"])
            for t in data["tests"]]
    assert rows == [
        ("1.1", "forward · test_forward::test_small", 10.0, 10.0, "passed", "after_published"),
        ("1.2", "forward · test_forward::test_tail", 0.0, 10.0, "failed", "after_published"),
        ("1.3", "forward · test_public::test_shape", 10.0, 10.0, "passed", "visible"),
        ("2.1", "speed · test_speed::test_large", None, None, None, "after_published"),
        ("3.1", "backward · test_backward::test_grads", 10.0, 10.0, "passed", "after_published"),
    ]
    pending_test = data["tests"][3]
    assert not {"score", "max_score", "status"} & set(pending_test)  # Gradescope shows it as neither
    assert pending_test["output"] == ("**Pending** (worth 10 points, not judged here): timed on a CUDA GPU only "
                                      "Timed on a GPU by the course staff's grade submit when they grade your "
                                      "submission (there is no GPU here).")
    assert pending_test["extra_data"] == {"pending": True, "max_score": 10.0}
    # the student's text renders as text: no link, no image, no HTML
    assert data["tests"][1]["output"] == ("forward: rows past the end hold \\[garbage\\](http://x) "
                                          "\\<img src=x\\>\n\nreread §24")
    assert data["score"] == 30.0 and data["output_format"] == data["test_output_format"] == "md"
    assert all(t["output_format"] == "md" for t in data["tests"])
    assert data["output"] == ("Timed: 30 / 40 points.\n\n10 points pending (not judged here):\n\n"
                              "speed (10 points): timed on a GPU by the course staff's grade submit when they grade "
                              "your submission (there is no GPU here).\n\n"
                              "Input seed 7; sandbox: process+uid+landlock+seccomp+reaper.")
    assert data["extra_data"] == {
        "assignment": "timed", "mode": "submit", "seed": 7, "sandbox_level": "process+uid+landlock+seccomp+reaper",
        "sandbox_override": False, "versions": {"grader": "0.1.0"}, "submission_sha256": "ab" * 32,
        "submitted_at": None, "due_at": None, "extension_s": 0.0, "late_days": 0, "late_penalty": 0.0,
        "graded_at": "2026-12-01T13:00:00+00:00"}
    assert "leaderboard" not in data  # nothing was timed


def test_results_json_puts_verified_gpu_timings_on_the_leaderboard():
    timing = {"ratio": 1.2345, "verified": True, "cpu_timed": False, "student": {"median_ms": 0.51234}}
    timed = TestOutcome(name="test_speed::test_large", task="speed", status=PASSED, fraction=1.0,
                        detail={"timing": timing})
    data = gradescope_results(timed_result(timed), TIMED)
    assert data["leaderboard"] == [{"name": "test_large: time / reference", "value": 1.234, "order": "asc"},
                                   {"name": "test_large: ms", "value": 0.5123, "order": "asc"}]
    assert data["tests"][3]["score"] == 10.0 and data["tests"][3]["status"] == "passed"
    unverified = TestOutcome(name="test_speed::test_large", task="speed", status=PASSED, fraction=1.0,
                             detail={"timing": {**timing, "verified": False}})
    assert "leaderboard" not in gradescope_results(timed_result(unverified), TIMED)
    cpu = TestOutcome(name="test_speed::test_large", task="speed", status=PASSED, fraction=1.0,
                      detail={"timing": {**timing, "cpu_timed": True}})
    assert "leaderboard" not in gradescope_results(timed_result(cpu), TIMED)


def test_markdown_text_escapes_everything_markdown_acts_on():
    assert markdown_text("a*b*_c_ `x` # h\n\n  - item\n12. one | t ~s~ & $x$ \\\n+ two\n# three\n3) four") == (
        "a\\*b\\*\\_c\\_ \\`x\\` # h\n\n\\- item\n\n12\\. one \\| t \\~s\\~ \\& \\$x\\$ \\\\\n\n\\+ two\n\n"
        "\\# three\n\n3\\) four")
    # what reads the same either way stays as written
    assert markdown_text("max abs error 0.336 at [1, 2] (rtol=0.0001); use --allow-weak-sandbox, snake_case §10") == (
        "max abs error 0.336 at \\[1, 2\\] (rtol=0.0001); use --allow-weak-sandbox, snake_case §10")


def test_the_gradescope_table_of_a_manifest_is_checked():
    base = {"id": "x", "files": ["a.py"], "tasks": [{"id": "t", "points": 1, "functions": ["f"]}]}
    assert parse_manifest(base).gradescope.hidden_tests == "visible"
    with pytest.raises(ManifestError) as caught:
        parse_manifest({**base, "gradescope": {"hidden_tests": "later", "public": "x"}})
    assert caught.value.problems == (
        "[gradescope] unknown key 'public' (did you mean 'public_tests'?)",
        "[gradescope] 'hidden_tests' must be one of visible, hidden, after_due_date, after_published, "
        "not the text 'later'")


# ------------------------------------------------------------------ submission_metadata.json
def metadata(tmp_path: Path, data: dict | str) -> Path:
    path = tmp_path / "submission_metadata.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_metadata_dates_with_a_per_student_extension(tmp_path: Path):
    dates = read_metadata(metadata(tmp_path, {
        "created_at": "2026-12-05T00:00:00.123456-08:00",
        "assignment": {"due_date": "2026-12-03T12:00:00.000000+00:00",
                       "late_due_date": "2026-12-05T12:00:00.000000+00:00"},
        "users": [{"id": 1, "assignment": {"due_date": "2026-12-03T12:00:00+00:00",
                                           "late_due_date": "2026-12-05T12:00:00+00:00"}},
                  {"id": 2, "assignment": {"due_date": "2026-12-04T12:00:00+00:00",  # the group's latest
                                           "late_due_date": "2026-12-06T18:00:00+00:00"}}]}))
    assert dates.submitted_at == utc("2026-12-05T08:00:00.123456")
    assert dates.due == utc("2026-12-03T12:00:00") and dates.extension == timedelta(days=1)
    assert dates.closes_at + dates.extension == utc("2026-12-06T18:00:00")  # the student's own late due date
    assert dates.notes == ()


def test_metadata_without_extensions_or_dates(tmp_path: Path):
    plain = read_metadata(metadata(tmp_path, {"created_at": "2026-12-02T08:00:00Z",
                                              "assignment": {"due_date": "2026-12-01T12:00:00Z",
                                                             "late_due_date": None}, "users": [{"id": 1}]}))
    assert plain == GradescopeDates(submitted_at=utc("2026-12-02T08:00:00"), due=utc("2026-12-01T12:00:00"))
    assert read_metadata(tmp_path / "absent.json") == GradescopeDates(
        notes=("no submission_metadata.json: graded as undated",))
    assert read_metadata(metadata(tmp_path, "{not json")).notes == (
        "submission_metadata.json unreadable (JSONDecodeError): graded as undated",)
    odd = read_metadata(metadata(tmp_path, {"created_at": "yesterday", "assignment": {"due_date": "2026-12-01T12:00"}}))
    assert odd == GradescopeDates(notes=("submission_metadata.json: created_at is not a date ('yesterday'); ignored",
                                         "submission_metadata.json: assignment.due_date has no time zone; ignored"))


def test_pick_workspace_finds_the_files_where_an_upload_put_them(tmp_path: Path):
    manifest = load_manifest(FIXTURE / "assignments" / "mini" / "assignment.toml")
    folder = tmp_path / "submission"
    (folder / "my-upload" / "mini").mkdir(parents=True)
    (folder / "my-upload" / "mini" / "mini.py").write_text("x = 1\n")
    assert pick_workspace(folder, manifest) == folder / "my-upload" / "mini"  # an uploaded zip of a folder
    (folder / "work.ipynb").write_text("{}")
    assert pick_workspace(folder, manifest) == folder / "work.ipynb"  # a lone notebook
    (folder / "mini.py").write_text("x = 1\n")
    assert pick_workspace(folder, manifest) == folder  # the files themselves


# --------------------------------------------------------------------- the bundle, run for real
def course_copy(tmp_path: Path, visibility: str | None = "after_published") -> Path:
    target = tmp_path / "course"
    copy_mini_course(target)
    if visibility:
        manifest = target / "assignments" / "mini" / "assignment.toml"
        manifest.write_text(manifest.read_text() + f'\n[gradescope]\nhidden_tests = "{visibility}"\n')
    return target


def autograder_home(course: Path, tmp_path: Path) -> Path:
    bundle = tmp_path / "autograder.zip"
    result = CliRunner().invoke(main, ["--course", str(course), "autograder", "gradescope", "mini", "--out",
                                       str(bundle)])
    assert result.exit_code == 0, result.output
    home = tmp_path / "autograder"
    with zipfile.ZipFile(bundle) as archive:
        archive.extractall(home / "source")
    for script in ("setup.sh", "run_autograder"):
        (home / "source" / script).chmod(0o755)
    (home / "submission").mkdir()
    return home


def run_autograder(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k not in ("GRADE_COURSE", "GRADE_SEED")}
    environment.update(GRADE_AUTOGRADER_HOME=str(home), GRADE_VENV=sys.prefix, GRADE_NO_BWRAP="1")
    environment.update(env)
    return subprocess.run(["bash", str(home / "source" / "run_autograder"), *args], env=environment,
                          capture_output=True, text=True, timeout=600)


LATE_WITH_EXTENSION = {
    "id": 1234, "created_at": "2026-12-05T08:00:00.000000+00:00",
    "assignment": {"due_date": "2026-12-03T12:00:00.000000+00:00", "late_due_date": "2026-12-06T12:00:00+00:00",
                   "title": "Mini", "total_points": "100.0"},
    "users": [{"email": "ada@example.edu", "id": 7, "name": "Ada",
               "assignment": {"due_date": "2026-12-04T12:00:00.000000+00:00",
                              "late_due_date": "2026-12-07T12:00:00.000000+00:00"}}],
}


@pytest.mark.sandbox
def test_run_autograder_writes_the_exact_results_of_a_late_submission_with_an_extension(tmp_path: Path):
    """Due 3 Dec on Gradescope (the manifest says 1 Dec), extended by a day for this student, handed
    in 20 h after the extended date: one started day late, 25 % off, from Gradescope's dates."""
    home = autograder_home(course_copy(tmp_path), tmp_path)
    (home / "submission" / "mini.py").write_text(CORRECT_A)
    (home / "submission" / "answers.toml").write_text("row_sum = 1\nratio = 2.5\n")  # half the quiz
    (home / "submission_metadata.json").write_text(json.dumps(LATE_WITH_EXTENSION))
    done = run_autograder(home, "--seed", "7")
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads((home / "results" / "results.json").read_text())
    level = data["extra_data"].pop("sandbox_level")
    assert level == "process+uid+landlock+seccomp+reaper"
    assert data["extra_data"].pop("versions")["python"] == platform.python_version()
    datetime.fromisoformat(data["extra_data"].pop("graded_at"))
    assert 0 < data.pop("execution_time") < 600
    sha = data["extra_data"].pop("submission_sha256")
    assert len(sha) == 64
    hidden = "after_published"
    passed = {"output": "", "output_format": "md", "status": "passed"}
    assert data == {
        "score": 67.5,  # (40 + 40 + 10) - 25 %
        "output": ("Mini assignment: 67.5 / 100 points.\n\nLate by 1 day(s): -22.5 points.\n\n"
                   "Due 2026-12-04T12:00:00+00:00 (extended by 24 h for you).\n\n"
                   "Input seed 7; sandbox: process+uid+landlock+seccomp+reaper."),
        "output_format": "md", "test_output_format": "md", "visibility": "visible", "stdout_visibility": "hidden",
        "tests": [
            {"name": "double · test_double::test_double_matrix", "number": "1.1", "score": 20.0, "max_score": 20.0,
             "visibility": hidden, "tags": ["double"], **passed},
            {"name": "double · test_double::test_float64", "number": "1.2", "score": 20.0, "max_score": 20.0,
             "visibility": hidden, "tags": ["double"], **passed},
            {"name": "normalize · test_normalize::test_normalize_square", "number": "2.1", "score": 13.34,
             "max_score": 13.34, "visibility": hidden, "tags": ["normalize"], **passed},  # the left-over hundredth
            {"name": "normalize · test_normalize::test_normalize_large_inputs", "number": "2.2", "score": 13.33,
             "max_score": 13.33, "visibility": hidden, "tags": ["normalize"], **passed},
            {"name": "normalize · test_normalize::test_float64", "number": "2.3", "score": 13.33,
             "max_score": 13.33, "visibility": hidden, "tags": ["normalize"], **passed},
            {"name": "quiz · quiz::row_sum", "number": "3.1", "score": 10.0, "max_score": 10.0,
             "visibility": "visible", "tags": ["quiz"], **passed},
            {"name": "quiz · quiz::ratio", "number": "3.2", "score": 0.0, "max_score": 10.0, "status": "failed",
             "visibility": "visible", "tags": ["quiz", "wrong"], "output_format": "md",
             "output": "not the expected answer; reread lecture §8"},
        ],
        "extra_data": {"assignment": "mini", "mode": "submit", "seed": 7, "sandbox_override": False,
                       "submitted_at": "2026-12-05T08:00:00+00:00", "due_at": "2026-12-04T12:00:00+00:00",
                       "extension_s": 86400.0, "late_days": 1, "late_penalty": 22.5},
    }
    assert not (home / "source" / ".grade").exists()  # nothing recorded: Gradescope keeps the scores


@pytest.mark.sandbox
def test_after_the_students_late_due_date_nothing_is_earned(tmp_path: Path):
    """20 h after the extended due date would cost 25 %; but this student's late window closed 12 h
    after it, so the submission earns nothing."""
    home = autograder_home(course_copy(tmp_path, visibility=None), tmp_path)
    (home / "submission" / "mini.py").write_text(CORRECT_A)
    user = {**LATE_WITH_EXTENSION["users"][0], "assignment": {"due_date": "2026-12-04T12:00:00+00:00",
                                                              "late_due_date": "2026-12-05T00:00:00+00:00"}}
    (home / "submission_metadata.json").write_text(json.dumps({**LATE_WITH_EXTENSION, "users": [user]}))
    done = run_autograder(home, "--seed", "7")
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads((home / "results" / "results.json").read_text())
    assert data["score"] == 0 and data["extra_data"]["late_penalty"] == 80.0
    assert {t["visibility"] for t in data["tests"]} == {"visible"}  # the manifest's default


@pytest.mark.sandbox
def test_run_autograder_explains_a_host_that_is_too_weak_and_fails(tmp_path: Path):
    home = autograder_home(course_copy(tmp_path), tmp_path)
    (home / "submission" / "mini.py").write_text(CORRECT_A)
    done = run_autograder(home, GRADE_SANDBOX_WITHOUT="landlock")
    assert done.returncode == 4, done.stdout + done.stderr
    data = json.loads((home / "results" / "results.json").read_text())
    assert data["score"] == 0 and data["tests"] == [] and data["extra_data"]["host_problem"] is True
    assert data["output"].startswith("The grader could not grade this submission: refusing an official grade: ")
    assert data["output"].endswith("This is a problem of the autograder, not of your submission: tell the "
                                   "course staff.")


@pytest.mark.sandbox
def test_run_autograder_writes_results_when_the_manifest_is_broken(tmp_path: Path):
    home = autograder_home(course_copy(tmp_path), tmp_path)
    (home / "source" / "assignments" / "mini" / "assignment.toml").write_text("id = 'mini'\n")  # no tasks
    done = run_autograder(home)
    assert done.returncode == 0, done.stdout + done.stderr  # a results.json with the reason
    data = json.loads((home / "results" / "results.json").read_text())
    assert data["score"] == 0 and "needs at least one [[tasks]] table" in data["output"]


@pytest.mark.sandbox
def test_run_autograder_writes_results_when_the_grader_itself_dies(tmp_path: Path):
    home = autograder_home(course_copy(tmp_path), tmp_path)
    venv = tmp_path / "broken-venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "grade").write_text("#!/usr/bin/env bash\necho 'Traceback ...' >&2\nexit 1\n")
    (venv / "bin" / "grade").chmod(0o755)
    done = run_autograder(home, GRADE_VENV=str(venv))
    assert done.returncode == 1
    data = json.loads((home / "results" / "results.json").read_text())
    assert data == {"score": 0, "tests": [], "output": "The grader could not grade this submission: the grader "
                                                       "stopped unexpectedly (exit 1); tell the course staff."}


@pytest.mark.slow  # starts a subprocess
def test_the_bundle_scripts_and_their_limits(tmp_path: Path):
    course = course_copy(tmp_path)
    out = build_autograder(assignment_of(course, "mini"), tmp_path / "a.zip", timeout_minutes=DEFAULT_TIMEOUT_MINUTES)
    with zipfile.ZipFile(out) as archive:
        setup = archive.read("setup.sh").decode()
        run = archive.read("run_autograder").decode()
        names = set(archive.namelist())
    assert "course.toml" not in names  # the fixture has none; a course's own is carried (below)
    import torch

    assert f'pip install -q "torch=={torch.__version__.split("+")[0]}" --index-url ' \
           f"https://download.pytorch.org/whl/cpu" in setup
    assert "apt-get install -y -qq python3 python3-venv python3-pip bubblewrap" in setup
    assert setup.rstrip().endswith('"$VENV/bin/grade" --course "$SOURCE" sandbox')
    assert f"timeout --kill-after=5 {DEFAULT_TIMEOUT_MINUTES * 60 - STOP_MARGIN_S} grade" in run
    for script in (setup, run):
        checked = subprocess.run(["bash", "-n", "-c", script], capture_output=True, text=True)
        assert checked.returncode == 0, checked.stderr
    (course / "course.toml").write_text("[sandbox]\nuid_range = [61000, 61099]\n")
    with zipfile.ZipFile(build_autograder(assignment_of(course, "mini"), tmp_path / "b.zip")) as archive:
        assert archive.read("course.toml").decode() == "[sandbox]\nuid_range = [61000, 61099]\n"


def test_an_assignment_that_cannot_finish_in_the_timeout_is_refused(tmp_path: Path):
    course = tmp_path / "course"
    shutil.copytree(ROOT / "assignments" / "assignment3", course / "assignments" / "assignment3")
    budget = load_manifest(course / "assignments" / "assignment3" / "assignment.toml").limits.submission_budget_s
    assert budget == 600
    with pytest.raises(GraderError, match=r"set the assignment's autograder timeout to at least 13 minutes on "
                                          r"Gradescope and pass --timeout-minutes 13"):
        build_autograder(assignment_of(course, "assignment3"), tmp_path / "a3.zip")
    assert not (tmp_path / "a3.zip").exists()
    assert build_autograder(assignment_of(course, "assignment3"), tmp_path / "a3.zip", timeout_minutes=13).is_file()
    result = CliRunner().invoke(main, ["--course", str(course), "autograder", "gradescope", "assignment3",
                                       "--out", str(tmp_path / "x.zip"), "--timeout-minutes", "41"])
    assert result.exit_code == 2 and "1 to 40 minutes, not 41" in result.output


# --------------------------------------------------------------------------- setup.sh
FAKE_APT = """#!/usr/bin/env bash
echo "apt-get $*" >> "$SETUP_LOG"
"""
FAKE_PYTHON3 = """#!/usr/bin/env bash
# python3 of a bare image: only `-m venv DIR` is used by setup.sh; the venv's grade is the real one
echo "python3 $*" >> "$SETUP_LOG"
if [ "$1 $2" = "-m venv" ]; then
  mkdir -p "$3/bin"
  printf '#!/usr/bin/env bash\\necho "venv python $*" >> "$SETUP_LOG"\\n' > "$3/bin/python"
  chmod +x "$3/bin/python"
  ln -s "$REAL_GRADE" "$3/bin/grade"
fi
"""


def run_setup(tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess, str]:
    """setup.sh with apt-get and the bare image's python3 standing in (no network here); the
    `grade sandbox` it ends with is the real command, starting a real worker."""
    home = autograder_home(course_copy(tmp_path), tmp_path)
    tools = tmp_path / "tools"
    tools.mkdir()
    for name, text in (("apt-get", FAKE_APT), ("python3", FAKE_PYTHON3)):
        (tools / name).write_text(text)
        (tools / name).chmod(0o755)
    log = tmp_path / "setup.log"
    environment = {k: v for k, v in os.environ.items() if k != "GRADE_COURSE"}
    environment.update(PATH=f"{tools}{os.pathsep}{environment['PATH']}", SETUP_LOG=str(log),
                       REAL_GRADE=str(PREFIX_BIN / "grade"), GRADE_AUTOGRADER_HOME=str(home),
                       GRADE_VENV=str(tmp_path / "venv"), GRADE_NO_BWRAP="1", **env)
    done = subprocess.run(["bash", str(home / "source" / "setup.sh")], env=environment, capture_output=True,
                          text=True, timeout=300)
    return done, log.read_text() if log.exists() else ""


@pytest.mark.sandbox
def test_setup_installs_into_a_venv_and_proves_the_sandbox(tmp_path: Path):
    done, log = run_setup(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "apt-get install -y -qq python3 python3-venv python3-pip bubblewrap libseccomp2 coreutils" in log
    assert f"python3 -m venv {tmp_path / 'venv'}" in log
    assert "venv python -m pip install -q -e " + str(tmp_path / "autograder" / "source") in log
    assert "official grades: allowed" in done.stdout


@pytest.mark.sandbox
def test_setup_fails_loudly_when_an_official_grade_is_impossible(tmp_path: Path):
    done, _ = run_setup(tmp_path, GRADE_SANDBOX_WITHOUT="seccomp")
    assert done.returncode == 4, done.stdout + done.stderr
    assert "official grades: refused" in done.stdout and "refusing an official grade" in done.stderr
