"""Intake limits: every hostile or broken submission is one clear SubmissionError,
found from metadata before anything big is read, and `grade batch` records it
as that entry's error and grades the rest.

All files are real: zips built with zipfile (headers patched by hand where a
tool would refuse to write them), notebooks and folders written to tmp_path.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import tracemalloc
import zipfile
from pathlib import Path

import pytest
from class_builder import ASSIGNMENT, BY_ID, build_class
from click.testing import CliRunner
from hostile import (
    BAD_ENTRIES,
    GOOD,
    HOSTILE,
    MIB,
    big_notebook,
    bomb_zip,
    huge_sparse_folder,
    huge_zip_file,
    lying_size_zip,
    patch_headers,
    value_flood_notebook,
    write,
    zip_bytes,
)

from grader.cli.main import main
from grader.core.errors import InvalidStudentId, SubmissionError
from grader.intake.submission import load_submission
from grader.storage.gradebook import Gradebook

MODULES = ("mini.py",)
HANG_S = 600  # what a blocked read costs before it fails the test


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    path = tmp_path / "submissions"
    path.mkdir()
    return path


class no_hang:
    """Fail (instead of hanging the suite) when a read blocks, e.g. on a FIFO: a read that blocks never
    returns, so the alarm is minutes away, well past what a batch takes on a busy machine."""

    def __enter__(self):
        def fail(*_):
            raise TimeoutError("the grader blocked reading a submission")
        self.previous = signal.signal(signal.SIGALRM, fail)
        signal.alarm(HANG_S)

    def __exit__(self, *exc):
        signal.alarm(0)
        signal.signal(signal.SIGALRM, self.previous)


def error_of(path: Path, student: str | None = None) -> str:
    with no_hang(), pytest.raises(SubmissionError) as caught:
        load_submission(path, MODULES, student=student)
    return f"{type(caught.value).__name__}: {caught.value}"


# ----------------------------------------------------------- one error per problem
@pytest.mark.parametrize("student", sorted(HOSTILE))
def test_each_hostile_submission_is_one_clear_error(folder: Path, student: str):
    build, expected = HOSTILE[student]
    message = error_of(build(folder), student)
    assert message == expected
    assert "\n" not in message and len(message) < 400


@pytest.mark.slow  # starts a subprocess
def test_an_encrypted_zip_made_by_the_zip_tool(folder: Path):
    if shutil.which("zip") is None:
        pytest.skip("the zip tool is not installed")
    work = folder / "work"
    work.mkdir()
    (work / "mini.py").write_text(GOOD)
    subprocess.run(["zip", "-q", "-P", "secret", str(folder / "s1.zip"), "mini.py"], cwd=work, check=True)
    assert error_of(folder / "s1.zip") == ("SubmissionError: s1.zip: mini.py is password-protected; zip the "
                                           "folder again without a password")


def test_names_in_messages_are_printable(folder: Path):
    data = patch_headers(zip_bytes({"evil\u202etxt.py": GOOD, "mini.py": GOOD}), flags=0x801)  # + UTF-8 names
    message = error_of(write(folder / "s1.zip", data))
    assert message == ("SubmissionError: s1.zip: eviltxt.py is password-protected; zip the folder again "
                       "without a password")


def test_a_zip_whose_header_lies_never_expands_past_the_header(folder: Path):
    path = lying_size_zip(folder)  # 64 MiB of zeros behind a header that says 64 bytes
    tracemalloc.start()
    try:
        error_of(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 * MIB


@pytest.mark.parametrize("build", [big_notebook, huge_zip_file, huge_sparse_folder, bomb_zip],
                         ids=lambda b: b.__name__)
def test_memory_does_not_grow_with_the_file(folder: Path, build):
    path = build(folder)
    tracemalloc.start()
    try:
        error_of(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 * MIB, f"{peak / MIB:.1f} MiB for {path.name}"


def test_a_200_mib_notebook_is_refused_from_its_size(folder: Path):
    path = folder / "s1.ipynb"
    with open(path, "wb") as fh:
        fh.truncate(200 * MIB)
    tracemalloc.start()
    try:
        message = error_of(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert message == ("SubmissionError: s1.ipynb is 200.0 MiB, more than the 20.0 MiB limit; clear the outputs "
                       "(Restart & Clear Output) and save it again")
    assert peak < MIB


def test_a_notebook_of_millions_of_values_is_refused_before_it_is_parsed(folder: Path):
    path = value_flood_notebook(folder)
    tracemalloc.start()
    try:
        error_of(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # the bytes and copies of them while they are scanned: parsed, 3.5 million lists would take 20 times as much
    assert peak < 4 * path.stat().st_size


# ---------------------------------------------------------------------- folders
def test_folder_links_and_special_files_are_never_followed(tmp_path: Path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text("TOKEN = 'staff only'\n")
    work = tmp_path / "work"
    work.mkdir()
    (work / "mini.py").write_text(GOOD)
    os.symlink(outside / "secret.py", work / "leak.py")
    os.symlink(outside, work / "linked")
    os.symlink("/dev/zero", work / "zeros.py")
    os.mkfifo(work / "pipe.py")
    (work / os.fsdecode(b"\xff.py")).write_text("X = 2\n")  # a name that is not UTF-8: skipped
    (work / "pkg").mkdir()
    (work / "pkg" / "helper.py").write_text("X = 1\n")
    with no_hang():
        submission = load_submission(work, MODULES, student="s1")
    assert submission.files == {"mini.py": GOOD.encode(), "pkg/helper.py": b"X = 1\n"}


def test_a_workspace_that_is_a_pipe_is_refused_without_blocking(folder: Path):
    os.mkfifo(folder / "s1.ipynb")
    assert error_of(folder / "s1.ipynb") == ("SubmissionError: s1.ipynb is not a regular file; hand in a folder, "
                                             "a .zip or an .ipynb")


def test_too_many_entries_in_a_folder(folder: Path):
    work = folder / "s1"
    work.mkdir()
    for i in range(2001):
        (work / f"._{i}").write_text("")  # skipped files still count as entries looked at
    assert error_of(work) == ("SubmissionError: s1 holds more than 2000 files and folders; hand in only the "
                              "assignment's files")


def test_a_module_file_too_large_to_parse(folder: Path):
    work = folder / "s1"
    work.mkdir()
    (work / "mini.py").write_text(GOOD + "#" * (2 * MIB))
    assert error_of(work) == "SubmissionError: s1: mini.py is 2.0 MiB, more than the 256 KiB a Python file may be"
    (work / "mini.py").write_text(GOOD)
    (work / "vendored.py").write_text("x = [" + "1," * 200_000 + "]\n")  # any .py: the grader parses them all
    assert error_of(work) == ("SubmissionError: s1: vendored.py is 391 KiB, more than the 256 KiB a Python file "
                              "may be")


def test_a_broken_answers_file_is_graded_as_wrong_answers_not_a_crash():
    from grader.core.quiz import Question, grade_quiz

    questions = [Question("row_sum", "choice", "", ("0", "1"))]
    for text, message in [("row_sum = " + "[" * 5000 + "]" * 5000 + "\n",
                           "answers.toml is not valid TOML (too deeply nested or too long to read)"),
                          ("answers = 5\n", "answers.toml has no table of answers")]:
        (outcome,) = grade_quiz(questions, {"row_sum": 1}, text)
        assert (outcome.status, outcome.message) == ("failed", message)


def test_a_notebook_in_a_zip_is_a_plain_file(folder: Path):
    data = zip_bytes({"work/mini.py": GOOD, "work/scratch.ipynb": "{ not json"})
    submission = load_submission(write(folder / "s1.zip", data), MODULES)
    assert submission.files == {"mini.py": GOOD.encode(), "scratch.ipynb": b"{ not json"}


# ------------------------------------------------------------------- student ids
def test_the_default_student_id_is_the_workspace_name_and_must_be_valid(tmp_path: Path):
    good = tmp_path / "ada.lovelace"
    good.mkdir()
    (good / "mini.py").write_text(GOOD)
    assert load_submission(good, MODULES).student == "ada.lovelace"
    assert load_submission(write(tmp_path / "s-1.zip", zip_bytes({"mini.py": GOOD})), MODULES).student == "s-1"
    bad = tmp_path / "my work"
    bad.mkdir()
    with pytest.raises(InvalidStudentId) as caught:
        load_submission(bad, MODULES)
    assert str(caught.value) == ("the workspace name my work: 'my work' is not a usable student id: ids are used "
                                 "as folder names and gradebook keys, so use 1 to 64 letters, digits and . _ - @ +, "
                                 "starting with a letter or digit; pass --student ID, or rename the workspace")
    with pytest.raises(InvalidStudentId, match="'../x' is not a usable student id"):
        load_submission(good, MODULES, student="../x")


# ------------------------------------------------------------------- grade batch
@pytest.mark.sandbox
def test_batch_records_every_bad_entry_and_grades_the_good_ones(tmp_path: Path):
    good = [BY_ID["s01"], BY_ID["s20"]]  # a folder and a zip, both correct
    course, submissions = build_class(tmp_path, good)
    for _, (build, _) in {**HOSTILE, **BAD_ENTRIES}.items():
        build(submissions)
    (submissions / "dup").mkdir()
    (submissions / "dup" / "mini.py").write_text(GOOD)
    write(submissions / "dup.zip", zip_bytes({"mini.py": GOOD}))
    gradebook = tmp_path / "gb.sqlite"
    args = ["--course", str(course), "batch", ASSIGNMENT, str(submissions), "--jobs", "1",
            "--gradebook", str(gradebook)]
    with no_hang():
        result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    duplicate = "ClassDataError: student 'dup' has two submissions: dup and dup.zip; keep one and run the batch again"
    expected = {student: error for student, (_, error) in {**HOSTILE, **BAD_ENTRIES}.items()}
    with Gradebook(gradebook) as book:
        recorded = [(e["student"], e["error"]) for e in book.errors(ASSIGNMENT)]
        latest = book.latest(ASSIGNMENT)
    assert sorted(recorded) == sorted([*expected.items(), ("dup", duplicate), ("dup", duplicate)])
    assert sorted(latest) == ["s01", "s20"]
    for student in good:
        assert latest[student.id].total == pytest.approx(student.expected_total, abs=1e-3)
    total = len(expected) + 4
    assert re.search(rf"Batch mini: {total} submission\(s\)", result.output)
    assert re.search(r"graded\s*│\s*2\b", result.output)
    handin = int(re.search(r"hand-in problems \(not readable as a submission\)\s*│\s*(\d+)", result.output)[1])
    grader = int(re.search(r"grader errors\s*│\s*(\d+)", result.output)[1])
    assert handin + grader == len(expected) + 1  # every bad entry, and the duplicate, is recorded as its error
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", result.output)
    reports = course / ".grade" / "reports"
    assert sorted(p.relative_to(reports).as_posix() for p in reports.rglob("*.html")) == \
        ["s01/mini.html", "s20/mini.html"]
    # a second run retries every error, records the same rows and grades nothing new
    with no_hang():
        again = CliRunner().invoke(main, args, catch_exceptions=False)
    assert again.exit_code == 0, again.output
    assert re.search(r"skipped \(already graded\)\s*│\s*2\b", again.output)
    with sqlite3.connect(gradebook) as db:
        assert db.execute("SELECT COUNT(*) FROM batch_errors").fetchone()[0] == len(expected) + 2
        assert db.execute("SELECT COUNT(*) FROM submissions").fetchone()[0] == 2


def test_one_line_cli_error_for_a_hostile_workspace(mini_course: Path, folder: Path):
    path = HOSTILE["z01"][0](folder)
    result = CliRunner().invoke(main, ["--course", str(mini_course), "submit", "mini", "--workspace", str(path)])
    assert result.exit_code == 2
    assert result.output == ("Error: z01.zip: mini.py is password-protected; zip the folder again without a "
                             "password\n")


def test_an_ordinary_zip_still_reads(folder: Path):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("s1-work/mini.py", GOOD)
        archive.writestr("s1-work/answers.toml", "row_sum = 1\n")
        archive.writestr("__MACOSX/._mini.py", "junk")
    submission = load_submission(write(folder / "s1.zip", buffer.getvalue()), MODULES)
    assert submission.files == {"mini.py": GOOD.encode(), "answers.toml": b"row_sum = 1\n"}
