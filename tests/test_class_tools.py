"""Roster, similarity, class report, exports, release and the Gradescope bundle.

These build gradebooks from scored (not graded) results, so they run in
seconds; the end-to-end class lives in test_batch.py.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest
from class_builder import CORRECT_A, CORRECT_B, CORRECT_C, DISGUISED_A, FIXTURE, REFERENCE, STUB, WRONG_AXIS
from click.testing import CliRunner

from grader.cli.main import main
from grader.core.course import Course
from grader.core.errors import ClassDataError, ReleaseLeak
from grader.core.manifest import load_manifest
from grader.core.records import FAILED, HANDIN_PROBLEM, PASSED, GradeResult, TestOutcome
from grader.core.scoring import score
from grader.intake.notebook import modules_from_notebook
from grader.intake.submission import MAX_SOURCE_BYTES, Submission
from grader.render.class_report import class_view_model
from grader.render.exports import export_csv, export_gradescope, write_csv
from grader.render.similarity import clusters, find_similar, instructor_sources, tokens, winnowed_hashes
from grader.ship.release import find_leaks, release
from grader.storage.gradebook import Gradebook
from grader.storage.roster import read_roster, read_timestamps
from tests.conftest import assignment_of, copy_mini_course


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture
def course(tmp_path: Path) -> Path:
    target = tmp_path / "course"
    copy_mini_course(target)
    return target


# ------------------------------------------------------------------------- roster
def test_roster_import_and_update(course: Path, tmp_path: Path):
    roster = tmp_path / "roster.csv"
    roster.write_text("\ufeffid,name,email\nada,Ada L,ada@example.edu\nbob,,\n\n")
    gradebook = tmp_path / "gb.sqlite"
    result = invoke("--course", str(course), "roster", "import", str(roster), "--gradebook", str(gradebook))
    assert result.exit_code == 0 and "2 student(s) imported" in result.output
    roster.write_text("ID,Name,Email\nada,Ada Lovelace,ada@example.edu\n")
    invoke("--course", str(course), "roster", "import", str(roster), "--gradebook", str(gradebook))
    with Gradebook(gradebook) as book:
        assert book.students() == [{"id": "ada", "name": "Ada Lovelace", "email": "ada@example.edu"},
                                   {"id": "bob", "name": None, "email": None}]


@pytest.mark.parametrize("text, message", [
    ("name,email\nAda,a@x\n", "missing column(s) id"),
    ("id,name\nada,A\nada,B\n", "listed twice"),
    ("id,name\n,nobody\n", "empty student id"),
])
def test_bad_rosters_fail_with_one_line(course: Path, tmp_path: Path, text: str, message: str):
    roster = tmp_path / "roster.csv"
    roster.write_text(text)
    result = CliRunner().invoke(main, ["--course", str(course), "roster", "import", str(roster),
                                       "--gradebook", str(tmp_path / "gb.sqlite")])
    assert result.exit_code == 2 and message in result.output
    with pytest.raises(ClassDataError):
        read_roster(roster)


def test_timestamps_need_a_time_zone(tmp_path: Path):
    path = tmp_path / "timestamps.csv"
    path.write_text("student,submitted_at\nada,2026-12-01T10:00:00+01:00\n")
    assert read_timestamps(path)["ada"].utcoffset().total_seconds() == 3600
    path.write_text("student,submitted_at\nada,2026-12-01T10:00:00\n")
    with pytest.raises(ClassDataError, match="no time zone"):
        read_timestamps(path)
    path.write_text("student,submitted_at\nada,yesterday\n")
    with pytest.raises(ClassDataError, match="line 2"):
        read_timestamps(path)


# --------------------------------------------------------------------- similarity
def test_a_disguised_copy_is_flagged_and_different_code_is_not():
    matches = find_similar({"a": CORRECT_A, "b": DISGUISED_A, "c": CORRECT_B, "d": CORRECT_C},
                           starter=[STUB])
    assert [(m.a, m.b, m.kind) for m in matches] == [("a", "b", "pair")]
    assert matches[0].share_a == 1.0 and matches[0].lines_a
    assert clusters(matches) == [["a", "b"]]


def test_normalisation_keeps_apis_and_drops_names_comments_layout():
    values = [t for t, _ in tokens("import torch\nx = torch.exp(y)  # note\n")]
    assert values == ["import", "torch", ";", "V", "=", "torch", ".", "exp", "(", "V", ")", ";"]
    assert [t for t, _ in tokens("a=torch.exp( b )")] == [t for t, _ in tokens("zz = torch.exp(q)")]
    assert winnowed_hashes(CORRECT_A) == winnowed_hashes(CORRECT_A)  # deterministic (no salted hash)
    broken = 's = "unterminated\nreturn torch.exp(x - m) / torch.exp(x - m).sum(-1)\n'
    assert tokens(broken)  # does not tokenise: falls back to a plain split, still fingerprinted


def test_starter_code_and_class_wide_boilerplate_are_ignored():
    assert find_similar({"a": STUB, "b": STUB}, starter=[STUB]) == []
    # everybody writes the same short double(); only the real copy (b of a) is flagged
    ops = ["exp", "sin", "cos", "tanh", "sigmoid", "abs", "relu", "log1p"]
    tail = "\n\ndef helper(v):\n    v = v.{0}() * v.{1}()\n    u = v.{2}() - v.{3}()\n    return (u + v.{0}()).{1}()\n"
    code = {f"s{i}": CORRECT_A.split("def normalize")[0] + tail.format(*(ops[(i + j) % 8] for j in range(4)))
            for i in range(6)}
    code["copy"] = code["s1"].replace("v", "w").replace("    ", "  ")
    flagged = {(m.a, m.b) for m in find_similar(code, starter=[STUB])}
    assert flagged == {("copy", "s1")}


def test_instructor_sources(course: Path):
    extra = course / "reference" / "mini" / "similarity_sources"
    extra.mkdir()
    (extra / "tutorial_kernel.py").write_text(WRONG_AXIS)
    (course / "course_kernels").mkdir()
    (course / "course_kernels" / "flash.py").write_text(CORRECT_C)
    sources = instructor_sources(Course(course), "mini")
    assert sorted(sources) == ["course_kernels/flash.py", "reference/mini/mini.py",
                               "reference/mini/similarity_sources/tutorial_kernel.py"]  # no mutants.py
    found = {(m.a, m.b) for m in find_similar({"x": REFERENCE, "y": WRONG_AXIS, "z": CORRECT_B}, sources,
                                              [STUB])}
    assert found == {("x", "reference/mini/mini.py"), ("y", "reference/mini/similarity_sources/tutorial_kernel.py")}


# ------------------------------------------------------------- synthetic gradebook
MANIFEST = load_manifest(FIXTURE / "assignments" / "mini" / "assignment.toml")


def fake_result(student: str, *, double: bool = True, normalize: bool = True, duration: float = 4.0,
                sha: str | None = None, timing: dict | None = None, late: str | None = None) -> GradeResult:
    from datetime import datetime

    diagnosis = {"id": "normalize_wrong_axis", "title": "normalised over the wrong axis", "section": "§10",
                 "explanation": "..."}
    outcomes = [
        TestOutcome(name="test_double_matrix", task="double", status=PASSED if double else FAILED,
                    fraction=1.0 if double else 0.0),
        TestOutcome(name="test_normalize_square", task="normalize", status=PASSED if normalize else FAILED,
                    fraction=1.0 if normalize else 0.0, diagnosis=None if normalize else diagnosis),
        TestOutcome(name="quiz::row_sum", task="quiz", status=PASSED, fraction=1.0),
    ]
    if timing:
        outcomes.append(TestOutcome(name="test_speed", task="double", status=PASSED, fraction=1.0,
                                    detail={"timing": timing}))
    when = datetime.fromisoformat(late) if late else None
    return GradeResult(assignment_id="mini", assignment_title=MANIFEST.title, student=student, mode="submit",
                       score=score(MANIFEST, outcomes, (), when), outcomes=tuple(outcomes), findings=(),
                       submission_sha256=sha or (student * 64)[:64], submission_form="folder",
                       submitted_at=late, graded_at="2026-12-01T13:00:00+00:00", seed=7, isolation="process",
                       isolation_level="process", duration_s=duration)


def timing(ratio: float, gpu: str = "NVIDIA H100") -> dict:
    return {"student": {"median_ms": 2.0 * ratio, "iqr_ms": 0.1, "min_ms": 1.9, "n": 20},
            "reference": {"median_ms": 2.0, "iqr_ms": 0.1, "min_ms": 1.9, "n": 20}, "ratio": ratio,
            "rounds": 5, "environment": {"gpu": gpu, "torch": "2.5"}, "student_tflops": 100 / ratio,
            "reference_tflops": 100.0, "fraction": 1.0}


@pytest.fixture
def gradebook(course: Path, tmp_path: Path) -> Path:
    path = tmp_path / "gb.sqlite"
    with Gradebook(path) as book:
        book.import_roster([{"id": "absent", "name": "A. Sent", "email": "a@x"},
                            {"id": "fast", "name": "F. Ast", "email": "f@x"}]
                           + [{"id": s, "name": None, "email": None}
                              for s in ("slow1", "slow2", "twin1", "twin2", "broken")])
        entries = [
            (fake_result("fast", duration=0.5, timing=timing(1.4)), CORRECT_A),
            (fake_result("slow1", duration=4.0, timing=timing(0.9)), CORRECT_B),
            (fake_result("slow2", duration=5.0, normalize=False), WRONG_AXIS),
            (fake_result("twin1", duration=4.5, sha="f" * 64), CORRECT_C),
            (fake_result("twin2", duration=4.2, sha="f" * 64, late="2026-12-02T08:00:00+00:00"), CORRECT_C),
        ]
        for result, code in entries:
            book.record(result, Submission(files={"mini.py": code.encode()}, source="x", form="folder",
                                           student=result.student))
        book.record_error("broken", "mini", "0" * 64, "SubmissionError: bad zip", HANDIN_PROBLEM)
    return path


def test_class_report_from_a_synthetic_gradebook(course: Path, gradebook: Path, tmp_path: Path):
    with Gradebook(gradebook) as book:
        model = class_view_model(assignment_of(course, "mini"), book)
    assert model["counts"] == {"roster": 7, "graded": 5, "missing": 2, "late": 1, "errors": 0, "handin": 1,
                               "submissions": 5, "off_roster": 0}
    assert [(r["student"], r["ratio"], r["rank"], r["gpu"]) for r in model["leaderboard"]] == [
        ("slow1", 0.9, 1, "NVIDIA H100"), ("fast", 1.4, 2, "NVIDIA H100")]
    assert model["leaderboard"][0]["tflops"] == pytest.approx(111.11, abs=0.01)
    assert [r["student"] for r in model["fast_full_marks"]] == ["fast"]
    assert model["identical"] == [{"sha": "f" * 12, "students": ["twin1", "twin2"]}]
    assert [(m["student"], m["error"]) for m in model["missing"]] == [("absent", ""), ("broken", "hand-in")]
    assert model["late"][0]["student"] == "twin2" and model["late"][0]["late_days"] == 1
    tasks = {t["id"]: t for t in model["tasks"]}
    assert tasks["normalize"]["misconceptions"][0]["students"] == ["slow2"]
    assert tasks["normalize"]["pass_rate"] == 80.0 and tasks["double"]["mean"] == 40.0
    assert [c["students"] for c in model["similarity"]["clusters"]] == [["twin1", "twin2"]]
    out = tmp_path / "class.html"
    result = invoke("--course", str(course), "report", "mini", "--out", str(out), "--gradebook", str(gradebook))
    assert result.exit_code == 0, result.output
    html = out.read_text()
    assert 'data-leader="slow1" data-ratio="0.9"' in html and 'data-fast="fast"' in html
    assert 'data-identical="twin1,twin2"' in html and 'data-handin="broken"' in html  # a hand-in problem:
    assert 'data-error="broken"' not in html and 'id="errors" data-value="0"' in html  # not a grader error
    assert "<link" not in html and "src=\"http" not in html


def test_report_needs_an_existing_gradebook(course: Path, tmp_path: Path):
    result = CliRunner().invoke(main, ["--course", str(course), "report", "mini",
                                       "--gradebook", str(tmp_path / "none.sqlite")])
    assert result.exit_code == 2 and "no gradebook" in result.output
    assert not (tmp_path / "none.sqlite").exists()


def test_exports_from_a_synthetic_gradebook(course: Path, gradebook: Path, tmp_path: Path):
    with Gradebook(gradebook) as book:
        table = list(csv.DictReader(io.StringIO(export_csv(assignment_of(course, "mini"), book))))
        written = export_gradescope(assignment_of(course, "mini"), book, tmp_path / "gs")
    by = {row["student"]: row for row in table}
    assert sorted(by) == ["absent", "broken", "fast", "slow1", "slow2", "twin1", "twin2"]
    assert by["absent"]["total"] == "" and by["absent"]["name"] == "A. Sent" and by["absent"]["max"] == "100"
    assert by["slow2"]["normalize"] == "0" and by["slow2"]["total"] == "60"
    assert by["twin2"]["late_days"] == "1" and by["twin2"]["late_penalty"] == "25"
    assert by["broken"]["note"] == "hand-in could not be read: SubmissionError: bad zip"
    assert by["absent"]["note"] == by["twin2"]["note"] == ""  # 75 - 25 late = 50: the columns add up
    assert [p.parent.name for p in written] == ["fast", "slow1", "slow2", "twin1", "twin2"]
    assert json.loads(written[2].read_text())["score"] == 60.0
    with Gradebook(gradebook) as book:
        book.record(fake_result("../evil"), Submission(files={}, source="x", form="folder", student="../evil"))
        with pytest.raises(ClassDataError, match="folder name"):  # not on the roster: exported with everyone
            export_gradescope(assignment_of(course, "mini"), book, tmp_path / "gs2", everyone=True)


def test_csv_export_file_is_written_whole(course: Path, gradebook: Path, tmp_path: Path):
    out = tmp_path / "exports" / "grades.csv"
    with Gradebook(gradebook) as book:
        text = export_csv(assignment_of(course, "mini"), book)
        assert write_csv(assignment_of(course, "mini"), book, out) == out
        assert out.read_text(encoding="utf-8") == text
        out.chmod(0o640)
        out.write_text("old\n")
        write_csv(assignment_of(course, "mini"), book, out)  # written again: new text, same permissions
        assert out.read_text(encoding="utf-8") == text and out.stat().st_mode & 0o777 == 0o640
        with pytest.raises(OSError):  # the rename cannot replace a folder: nothing half-written is left
            write_csv(assignment_of(course, "mini"), book, tmp_path / "exports")
    assert sorted(p.name for p in out.parent.iterdir()) == ["grades.csv"]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")) == []
    result = invoke("--course", str(course), "export", "mini", "--format", "csv", "--out", str(out),
                    "--gradebook", str(gradebook))
    assert result.exit_code == 0 and f"csv: {out}" in result.output and out.read_text(encoding="utf-8") == text


# ------------------------------------------------------------------------ release
def test_release_bundle_zip_and_notebook(course: Path, tmp_path: Path):
    handout = "# Mini\n\nIntro.\n\n## Setup\n\n```bash\n# not a heading\npip install -e .\n```\n\n## Tasks\n\nGo.\n"
    (course / "assignments" / "mini" / "README.md").write_text(handout)
    result = invoke("--course", str(course), "release", "mini", "--out", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    with zipfile.ZipFile(tmp_path / "out" / "mini.zip") as archive:
        names = sorted(archive.namelist())
        assert archive.read("mini/mini.py").decode() == STUB
    assert names == ["mini/README.md", "mini/answers.toml", "mini/assignment.toml", "mini/mini.py",
                     "mini/quiz.toml", "mini/tests/test_public.py"]
    notebook = nbformat.read(tmp_path / "out" / "mini.ipynb", as_version=4)
    nbformat.validate(notebook)
    markdown = [c.source for c in notebook.cells if c.cell_type == "markdown"]
    assert markdown[1:4] == ["# Mini\n\nIntro.", "## Setup\n\n```bash\n# not a heading\npip install -e .\n```",
                             "## Tasks\n\nGo."]
    code = [c.source for c in notebook.cells if c.cell_type == "code"]
    assert code[0].strip() == STUB.strip() and "grade check mini --workspace mini.ipynb" in code[-1]
    assert "grade check mini" in markdown[-1]
    assembled = modules_from_notebook(nbformat.writes(notebook).encode(), ("mini.py",))["mini.py"].decode()
    assert "def double" in assembled and "def normalize" in assembled
    # the same folder always gives the same zip, and a release again replaces each file whole (written beside
    # it, then renamed: a new inode), never rewriting the file a reader may hold open
    first = (tmp_path / "out" / "mini.zip").read_bytes()
    inodes = {name: (tmp_path / "out" / name).stat().st_ino for name in ("mini.zip", "mini.ipynb")}
    release(assignment_of(course, "mini"), tmp_path / "out")
    assert (tmp_path / "out" / "mini.zip").read_bytes() == first
    assert all((tmp_path / "out" / name).stat().st_ino != inode for name, inode in inodes.items())
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["mini.ipynb", "mini.zip"]  # no temporary left


def plant(course: Path, name: str, text: str | bytes) -> None:
    path = course / "assignments" / "mini" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode())


@pytest.mark.parametrize("name, content, message", [
    ("solution.py", (FIXTURE / "reference/mini/mini.py").read_bytes(), "same bytes as reference/mini/mini.py"),
    ("notes.py", REFERENCE.replace("    ", "  ") + "\n\n# mine\n", "same text as reference/mini/mini.py"),
    ("tests/test_hidden.py", (FIXTURE / "reference/mini/tests/test_double.py").read_bytes(),
     "same bytes as reference/mini/tests/test_double.py"),
    ("quiz_key.toml", "[answers]\nrow_sum = 0\n", "instructor-only file name"),
    ("extra/mutants.py", "x = 1\n", "instructor-only file name"),
    ("test_more.py", "def test_x():\n    assert True\n", "test file outside tests/"),
    ("mini.py", STUB + "\n\ndef normalize(x: torch.Tensor) -> torch.Tensor:\n"
                       "    shifted = x - x.amax(dim=-1, keepdim=True)  # (..., n)\n"
                       "    weights = shifted.exp()\n"
                       "    return weights / weights.sum(dim=-1, keepdim=True)\n",
     "contains normalize from reference/mini/mini.py"),
])
def test_release_refuses_instructor_material(course: Path, tmp_path: Path, name, content, message):
    plant(course, name, content)
    result = CliRunner().invoke(main, ["--course", str(course), "release", "mini", "--out", str(tmp_path / "out")])
    assert result.exit_code == 3, result.output
    assert message in result.output and "refusing to release mini" in result.output
    assert not (tmp_path / "out").exists()  # nothing written


def test_release_refuses_kernel_copies_and_symlinks(course: Path, tmp_path: Path):
    (course / "course_kernels").mkdir()
    (course / "course_kernels" / "flash.py").write_text("def _kernel(a, b):\n    return a @ b\n")
    plant(course, "helpers.py", "import torch\n\n\ndef _kernel(a, b):\n    return a @ b\n")
    with pytest.raises(ReleaseLeak, match="contains _kernel from course_kernels/flash.py"):
        release(assignment_of(course, "mini"), tmp_path / "out")
    (course / "assignments" / "mini" / "helpers.py").unlink()
    os.symlink(course / "reference" / "mini" / "quiz_key.toml", course / "assignments" / "mini" / "key.toml")
    with pytest.raises(ReleaseLeak, match="symbolic link"):
        release(assignment_of(course, "mini"), tmp_path / "out")


def test_stub_like_reference_functions_are_not_leaks():
    instructor = {"reference/x/a.py": b'def f(x):\n    """Doc."""\n    raise NotImplementedError("f")\n',
                  "reference/x/__init__.py": b""}
    bundle = {"a.py": b'def f(x):\n    """Doc."""\n    raise NotImplementedError("f")\n\n\nX = 1\n',
              "__init__.py": b""}
    assert find_leaks(bundle, instructor) == []


# --------------------------------------------------------------------- autograder
@pytest.mark.slow  # starts a subprocess
def test_gradescope_autograder_bundle(course: Path, tmp_path: Path):
    other = course / "reference" / "other"  # another assignment's reference must not ship
    other.mkdir()
    (other / "secret.py").write_text("x = 1\n")
    (course / "reference" / "mini" / "__pycache__").mkdir()
    (course / "reference" / "mini" / "__pycache__" / "mini.cpython-311.pyc").write_bytes(b"")
    out = tmp_path / "autograder.zip"
    result = invoke("--course", str(course), "autograder", "gradescope", "mini", "--out", str(out))
    assert result.exit_code == 0, result.output
    with zipfile.ZipFile(out) as archive:
        names = set(archive.namelist())
        modes = {i.filename: (i.external_attr >> 16) & 0o777 for i in archive.infolist()}
        run = archive.read("run_autograder").decode()
        setup = archive.read("setup.sh").decode()
    for required in ("setup.sh", "run_autograder", "pyproject.toml", "README.md", "grader/cli/main.py",
                     "grader/sandbox/worker.py", "templates/report.html.j2", "assignments/mini/assignment.toml",
                     "assignments/mini/mini.py", "reference/__init__.py", "reference/mini/mini.py",
                     "reference/mini/mutants.py", "reference/mini/quiz_key.toml",
                     "reference/mini/tests/test_double.py"):
        assert required in names, required
    assert not any(n.startswith("reference/other") or "__pycache__" in n for n in names)
    assert modes["setup.sh"] == modes["run_autograder"] == 0o755
    # run_autograder grades through `grade autograder run` (it records nothing and picks the workspace from
    # the manifest's files: tests/test_gradescope.py runs it for real)
    assert "ASSIGNMENT=mini" in run and 'autograder run "$ASSIGNMENT"' in run
    assert "HOME_DIR=${GRADE_AUTOGRADER_HOME:-/autograder}" in run and 'RESULTS="$HOME_DIR/results/results.json"' in run
    assert 'SOURCE="$HOME_DIR/source"' in setup and 'pip install -q -e "$SOURCE"' in setup
    assert "download.pytorch.org/whl/cpu" in setup
    checked = subprocess.run(["bash", "-n", "-c", run], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    # built again: the same bytes, the file replaced whole (a new inode), nothing left beside it
    first, inode = out.read_bytes(), out.stat().st_ino
    assert invoke("--course", str(course), "autograder", "gradescope", "mini", "--out", str(out)).exit_code == 0
    assert out.read_bytes() == first and out.stat().st_ino != inode
    assert [p.name for p in out.parent.iterdir() if p.name.startswith(".autograder.zip.")] == []


@pytest.mark.slow
def test_run_autograder_grades_a_submission_and_explains_a_failure(course: Path, tmp_path: Path):
    """The bundle's scripts, run with /autograder moved into tmp (the installed grader does the grading)."""
    bundle = tmp_path / "bundle.zip"
    invoke("--course", str(course), "autograder", "gradescope", "mini", "--out", str(bundle))
    home = tmp_path / "ag"
    with zipfile.ZipFile(bundle) as archive:
        archive.extractall(home / "source")
    run = (home / "source" / "run_autograder").read_text().replace("/autograder", str(home))
    (home / "run").write_text(run)
    bindir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
    (home / "submission").mkdir()
    (home / "submission" / "mini.py").write_text(CORRECT_A)
    (home / "submission" / "answers.toml").write_text("row_sum = 1\nratio = 1.43\n")
    (home / "submission_metadata.json").write_text(json.dumps({"created_at": "2026-12-02T08:00:00+00:00"}))
    subprocess.run(["bash", str(home / "run")], env=env, capture_output=True, check=True, timeout=300)
    results = json.loads((home / "results" / "results.json").read_text())
    assert results["score"] == 75.0 and "Late by 1 day" in results["output"]  # 100 less 25 % late
    shutil.rmtree(home / "submission")
    (home / "submission").mkdir()
    (home / "submission" / "work.zip").write_bytes(b"not a zip")
    subprocess.run(["bash", str(home / "run")], env=env, capture_output=True, check=True, timeout=300)
    results = json.loads((home / "results" / "results.json").read_text())
    assert results["score"] == 0 and re.search(r"could not grade this submission: .*not a valid zip",
                                               results["output"])


def test_without_a_roster_a_hand_in_that_could_not_be_read_has_its_row_and_a_total_override_says_why(
        course: Path, tmp_path: Path):
    with Gradebook(tmp_path / "gb.sqlite") as book:
        book.record(fake_result("ada"), Submission(files={}, source="x", form="folder", student="ada"))
        book.record_error("cy", "mini", "1" * 64, "SubmissionError: cy.zip is not a zip archive", HANDIN_PROBLEM)
        graded = book.latest("mini")["ada"].sha256  # an override of the very grading that counts
        book.add_override("ada", "mini", None, 88, "oral exam", sha256=graded, total_before=0, total_after=88,
                          author="prof")
        rows = {row["student"]: row for row in csv.DictReader(io.StringIO(export_csv(assignment_of(course, "mini"),
                                                                                    book)))}
    assert sorted(rows) == ["ada", "cy"]
    assert rows["cy"]["total"] == "" and rows["cy"]["note"] == ("hand-in could not be read: SubmissionError: cy.zip "
                                                                 "is not a zip archive")
    tasks = sum(float(rows["ada"][t]) for t in ("double", "normalize", "quiz"))
    assert rows["ada"]["total"] == "88" and tasks != 88
    assert rows["ada"]["note"] == f"the total is set by staff (oral exam): the tasks add up to {tasks:g}"


# The largest file intake keeps, shaped to cost the most: every line blank, one line of operators,
# nesting as deep as Python parses, the most tokens a byte can make.
PATHOLOGICAL = {
    "blank_lines": "\n" * MAX_SOURCE_BYTES,
    "one_long_line": "x = " + "1+" * (MAX_SOURCE_BYTES // 2 - 3) + "1\n",
    "deep_nesting": "".join("    " * d + f"if x{d}:\n" for d in range(90)) + "    " * 90 + "pass\n",
    "many_tokens": "a(b)\n" * (MAX_SOURCE_BYTES // 5),
    "unclosed": "f(\n" + "\n" * (MAX_SOURCE_BYTES - 4),
}


@pytest.mark.slow  # about 10 s of CPU: five files at the cap, tokenised and hashed
@pytest.mark.timeout(120)  # a file of blank lines at the cap took the quadratic pass about half an hour
def test_class_report_stays_linear_in_pathological_files(course: Path, tmp_path: Path):
    path = tmp_path / "gb.sqlite"
    entries = {name: text.encode()[:MAX_SOURCE_BYTES] for name, text in PATHOLOGICAL.items()}
    entries.update({"twin1": CORRECT_C.encode(), "twin2": CORRECT_C.encode(), "other": CORRECT_B.encode()})
    with Gradebook(path) as book:
        for student, code in entries.items():
            book.record(fake_result(student, sha=hashlib.sha256(code).hexdigest()),
                        Submission(files={"mini.py": code}, source="x", form="folder", student=student))
        model = class_view_model(assignment_of(course, "mini"), book)
    assert [c["students"] for c in model["similarity"]["clusters"]] == [["twin1", "twin2"]]
    assert len(winnowed_hashes(PATHOLOGICAL["one_long_line"])) > 1000
    assert winnowed_hashes(PATHOLOGICAL["blank_lines"]) == []


def test_winnowing_keeps_the_rightmost_minimum_of_every_window():
    """The linear pass picks what the definition picks: each window's rightmost smallest hash, once."""
    from grader.render import similarity

    text = "".join(f"y{i % 7} = x.sum({i % 3}) + z[{i % 5}]\n" for i in range(300))
    stream = tokens(text)
    grams = [similarity._hash(tuple(t for t, _ in stream[i:i + similarity.K]))
             for i in range(len(stream) - similarity.K + 1)]
    chosen = sorted({start + max(i for i, h in enumerate(grams[start:start + similarity.WINDOW])
                                 if h == min(grams[start:start + similarity.WINDOW]))
                     for start in range(len(grams) - similarity.WINDOW + 1)})
    assert [(f.hash, f.line) for f in winnowed_hashes(text)] == [(grams[i], stream[i][1]) for i in chosen]
