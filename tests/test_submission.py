from __future__ import annotations

import io
import json
import zipfile

import nbformat
import pytest

from grader.core.errors import SubmissionError
from grader.intake.notebook import assemble_source
from grader.intake.submission import load_submission
from tests.conftest import copy_mini_course


def test_folder_skips_caches(tmp_path):
    (tmp_path / "mini.py").write_text("x = 1\n")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "mini.pyc").write_bytes(b"junk")
    sub = load_submission(tmp_path, ("mini.py",), student="s1")
    assert list(sub.files) == ["mini.py"] and len(sub.sha256) == 64 and sub.form == "folder"


def test_zip_with_a_top_folder_and_hostile_paths(tmp_path):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("work/mini.py", "x = 1\n")
        archive.writestr("work/../../evil.py", "boom\n")
        archive.writestr("/abs.py", "boom\n")
    path = tmp_path / "s2.zip"
    path.write_bytes(buffer.getvalue())
    sub = load_submission(path, ("mini.py",))
    assert sub.files == {"mini.py": b"x = 1\n"} and sub.student == "s2"


def test_bad_zip_is_a_clear_error(tmp_path):
    path = tmp_path / "s3.zip"
    path.write_bytes(b"not a zip")
    with pytest.raises(SubmissionError, match="not a valid zip"):
        load_submission(path, ("mini.py",))


def test_notebook_keeps_definitions_only(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# My work"),
        nbformat.v4.new_code_cell("import torch\n%matplotlib inline"),
        nbformat.v4.new_code_cell("def double(x):\n    return x * 2\n\nprint(double(torch.ones(2)))"),
        nbformat.v4.new_code_cell("import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()"),
        nbformat.v4.new_code_cell("def broken(:\n    pass"),
        nbformat.v4.new_code_cell("SCALE = 2\nfig = plt.figure()"),
    ]
    source = assemble_source(nbformat.writes(nb).encode(), "s4.ipynb")
    assert "def double" in source and "SCALE = 2" in source
    assert "print(" not in source and "plt.plot" not in source and "plt.figure" not in source
    assert "cell 5 skipped" in source
    path = tmp_path / "s4.ipynb"
    path.write_text(nbformat.writes(nb))
    sub = load_submission(path, ("mini.py",))
    assert sub.form == "notebook" and b"def double" in sub.files["mini.py"]


@pytest.mark.parametrize("content", [b"{not json", json.dumps({"hello": 1}).encode(), b""])
def test_broken_notebooks_are_clear_errors(tmp_path, content):
    path = tmp_path / "s5.ipynb"
    path.write_bytes(content)
    with pytest.raises(SubmissionError, match="not a readable Jupyter notebook"):
        load_submission(path, ("mini.py",))


def test_missing_workspace(tmp_path):
    with pytest.raises(SubmissionError, match="does not exist"):
        load_submission(tmp_path / "nope", ("mini.py",))


def test_a_notebook_cell_nested_too_deep_is_read_without_crashing_the_grader(tmp_path):
    """Before Python 3.11 parsing such a cell overflowed the C stack: a segmentation fault of the grader."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("def double(x):\n    return " + "+".join(["x"] * 120000) + "\n"),
                nbformat.v4.new_code_cell("def normalize(x):\n    return x\n")]
    path = tmp_path / "deep.ipynb"
    path.write_text(nbformat.writes(nb))
    sub = load_submission(path, ("mini.py",))
    assert b"def normalize" in sub.files["mini.py"]


# ------------------------------------------------------------- where the files are inside a hand-in
def test_a_folder_one_or_two_down_is_found_and_the_submission_says_so(tmp_path):
    entry = tmp_path / "s017"
    (entry / "my_solution").mkdir(parents=True)
    (entry / "my_solution" / "mini.py").write_text("x = 1\n")
    (entry / "my_solution" / "answers.toml").write_text("row_sum = 1\n")
    (entry / "notes.txt").write_text("outside the workspace: left out\n")
    sub = load_submission(entry, ("mini.py",))
    assert sub.files == {"mini.py": b"x = 1\n", "answers.toml": b"row_sum = 1\n"}
    assert sub.found_in == "my_solution" and sub.missing == ()
    assert sub.notes == ("the assignment's files were in the folder my_solution/ inside s017: that folder was graded",)
    deeper = tmp_path / "s018"
    (deeper / "Downloads" / "hw1").mkdir(parents=True)
    (deeper / "Downloads" / "hw1" / "mini.py").write_text("x = 2\n")
    assert load_submission(deeper, ("mini.py",)).found_in == "Downloads/hw1"
    top = tmp_path / "s019"
    (top / "old").mkdir(parents=True)
    (top / "mini.py").write_text("x = 3\n")
    (top / "old" / "mini.py").write_text("x = 0\n")
    at_top = load_submission(top, ("mini.py",))  # the top holds the file: graded as it is
    assert at_top.found_in == "" and sorted(at_top.files) == ["mini.py", "old/mini.py"] and at_top.notes == ()


def test_a_zip_of_a_folder_is_unwrapped_and_says_so(tmp_path):
    path = tmp_path / "s20.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("s20-work/mini.py", "x = 1\n")
        archive.writestr("s20-work/helpers/util.py", "y = 2\n")
    sub = load_submission(path, ("mini.py",))
    assert sorted(sub.files) == ["helpers/util.py", "mini.py"] and sub.found_in == "s20-work"
    assert "in the folder s20-work/ inside s20.zip" in sub.notes[0]


def test_a_hand_in_without_the_assignments_files_is_a_problem_listing_what_it_holds(tmp_path):
    entry = tmp_path / "s021"
    (entry / "src").mkdir(parents=True)
    (entry / "src" / "attention.py").write_text("x = 1\n")
    (entry / "README.md").write_text("hi\n")
    with pytest.raises(SubmissionError) as raised:
        load_submission(entry, ("mini.py",))
    assert str(raised.value) == ("s021 holds none of the assignment's files (mini.py, answers.toml), at its top or "
                                 "up to 3 folders down; it holds: README.md, src/attention.py; hand in a folder, "
                                 ".zip or .ipynb with mini.py, answers.toml")
    empty = tmp_path / "s022"
    empty.mkdir()
    with pytest.raises(SubmissionError, match="it holds: nothing"):
        load_submission(empty, ("mini.py",))
    many = tmp_path / "s023"
    many.mkdir()
    for number in range(20):
        (many / f"file{number:02d}.txt").write_text("x")
    with pytest.raises(SubmissionError, match=r"file11\.txt and 8 more; hand in"):
        load_submission(many, ("mini.py",))


def test_two_folders_that_hold_the_files_are_a_problem_not_a_guess(tmp_path):
    entry = tmp_path / "s024"
    for folder in ("draft", "final"):
        (entry / folder).mkdir(parents=True)
        (entry / folder / "mini.py").write_text("x = 1\n")
    with pytest.raises(SubmissionError, match=r"in more than one folder \(draft/, final/\); hand in one folder"):
        load_submission(entry, ("mini.py",))


def test_a_batch_records_a_hand_in_without_the_files_as_its_problem(tmp_path):
    """Not an official 0: the entry's batch error names what it holds, and a rerun retries it."""

    from grader.pipeline.batch import run_batch
    from grader.storage.gradebook import Gradebook
    from tests.conftest import assignment_of

    course = tmp_path / "course"
    copy_mini_course(course)
    submissions = tmp_path / "class"
    (submissions / "s017" / "work").mkdir(parents=True)
    (submissions / "s017" / "work" / "attention.py").write_text("x = 1\n")
    with Gradebook(tmp_path / "gb.sqlite") as book:
        summary = run_batch(assignment_of(course, "mini"), submissions, book, allow_weak_sandbox=True,
                            write_reports=False)
        assert summary.graded == [] and book.latest("mini") == {}  # nothing graded, no zero recorded
        (error,) = book.errors("mini")
    assert error["student"] == "s017" and error["error"].startswith(
        "SubmissionError: s017 holds none of the assignment's files (mini.py, answers.toml)")
    assert "it holds: work/attention.py" in error["error"]
    (line,) = summary.lines
    assert (line.student, line.outcome, line.total) == ("s017", "error", None)
    assert line.change.startswith("hand-in could not be read: SubmissionError: s017 holds none")
