from __future__ import annotations

import io
import json
import zipfile

import nbformat
import pytest

from grader.core.errors import SubmissionError
from grader.intake.notebook import assemble_source
from grader.intake.submission import load_submission


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
