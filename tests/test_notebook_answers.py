"""A notebook carries its quiz answers in a cell tagged `answers`, so a notebook alone can earn full
marks; the released notebook has that cell, blank. Notebooks are written and read with nbformat,
graded for real through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
from class_builder import ANSWERS_RIGHT, CORRECT_A
from click.testing import CliRunner

from grader.cli.main import main
from grader.intake.notebook import ANSWERS_TAG, answers_from_notebook, assemble_source
from grader.intake.submission import load_submission
from tests.conftest import copy_mini_course

v4 = nbformat.v4


def notebook_bytes(*cells) -> bytes:
    return nbformat.writes(v4.new_notebook(cells=list(cells))).encode()


def tagged(cell, *tags: str):
    cell.metadata["tags"] = list(tags)
    return cell


def test_the_tagged_cell_is_the_answers_and_never_code():
    data = notebook_bytes(
        v4.new_code_cell(CORRECT_A),
        tagged(v4.new_raw_cell("row_sum = 1\nratio = 1.43\n"), "answers"),
        tagged(v4.new_code_cell("row_sum = 99  # tagged code: answers too, never assembled"), "other", "answers"),
        v4.new_raw_cell("ratio = 7  # untagged: not an answer"),
    )
    assert answers_from_notebook(data) == "row_sum = 1\nratio = 1.43\nrow_sum = 99  # tagged code: answers too, " \
                                          "never assembled\n"
    source = assemble_source(data)
    assert "def double" in source and "row_sum" not in source
    fenced = notebook_bytes(tagged(v4.new_markdown_cell("My answers:\n\n```toml\nrow_sum = 1\n```\n"), ANSWERS_TAG))
    assert answers_from_notebook(fenced) == "row_sum = 1\n"
    assert answers_from_notebook(notebook_bytes(v4.new_code_cell(CORRECT_A))) is None
    odd = json.loads(notebook_bytes(v4.new_raw_cell("x = 1")))
    odd["cells"][0]["metadata"] = {"tags": "answers"}  # not a list: no tags
    assert answers_from_notebook(json.dumps(odd).encode()) is None


def test_a_notebook_submission_holds_answers_toml(tmp_path: Path):
    path = tmp_path / "ada.ipynb"
    path.write_bytes(notebook_bytes(v4.new_code_cell(CORRECT_A),
                                    tagged(v4.new_raw_cell(ANSWERS_RIGHT), ANSWERS_TAG)))
    submission = load_submission(path, ("mini.py",))
    assert submission.files["answers.toml"] == ANSWERS_RIGHT.encode() and submission.form == "notebook"
    path.write_bytes(notebook_bytes(tagged(v4.new_raw_cell("x = '" + "a" * 70_000 + "'"), ANSWERS_TAG)))
    with pytest.raises(Exception, match="answers.toml is .* more than the 64 KiB"):
        load_submission(path, ("mini.py",))


@pytest.mark.sandbox
@pytest.mark.slow
def test_the_released_notebook_filled_in_earns_full_marks(tmp_path: Path):
    course = tmp_path / "course"
    copy_mini_course(course)
    runner = CliRunner()
    released = runner.invoke(main, ["--course", str(course), "release", "mini", "--out", str(tmp_path / "out")])
    assert released.exit_code == 0, released.output
    notebook = nbformat.read(tmp_path / "out" / "mini.ipynb", as_version=4)
    nbformat.validate(notebook)
    (answers,) = [c for c in notebook.cells if ANSWERS_TAG in c.metadata.get("tags", [])]
    assert answers.cell_type == "raw"
    assert answers.source == (course / "assignments" / "mini" / "answers.toml").read_text()  # blank
    quiz = next(c for c in notebook.cells if c.cell_type == "markdown" and c.source.startswith("## Quiz"))
    assert "`row_sum`: What does a row of attention weights add up to? (0: 0; 1: 1; 2: the number of keys) §11" \
        in quiz.source
    stub = next(c for c in notebook.cells if c.cell_type == "code" and "def normalize" in c.source)
    stub.source = (course / "reference" / "mini" / "mini.py").read_text()  # the student's work
    answers.source = ANSWERS_RIGHT
    work = tmp_path / "ada.ipynb"
    nbformat.write(notebook, str(work))
    out = tmp_path / "results.json"
    graded = runner.invoke(main, ["--course", str(course), "submit", "mini", "--workspace", str(work),
                                  "--json", str(out), "--no-record"])
    assert graded.exit_code == 0, graded.output
    data = json.loads(out.read_text())
    assert data["score"] == 100.0
    assert all(t["status"] == "passed" for t in data["tests"] if t["name"].startswith("quiz"))
