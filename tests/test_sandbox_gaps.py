"""A grading that runs without a sandbox layer the host could give says so, in one line, with the fix:
as root, a folder closed to other users above the Python installation costs the uid layer (and, under
bubblewrap, the template workers), and only `grade sandbox` used to say why."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.cli.main import main
from grader.sandbox import isolation, uids


def closed_file(tmp_path: Path) -> tuple[Path, Path]:
    """A file under a folder that other users cannot enter (as `mktemp -d` makes them)."""
    closed = tmp_path / "closed"
    (closed / "lib").mkdir(parents=True)
    (closed / "lib" / "module.py").write_text("")
    closed.chmod(0o700)
    return closed, closed / "lib" / "module.py"


def test_the_closed_folder_is_found_and_named_as_the_fix(tmp_path: Path):
    closed, inside = closed_file(tmp_path)
    assert uids.closed_folders((str(inside),))[-1] == str(closed)  # and any closed folder above it
    host = isolation.HostLayers(bubblewrap=True, uid="uid 60001 cannot reach ...", landlock_abi=1, seccomp="",
                                uid_fix=f"chmod o+x {closed}")
    (gap,) = host.predicted().gaps
    assert gap.startswith(f"the sandbox ran without its uid layer, which this host can give: `chmod o+x {closed}`")
    assert isolation.HostLayers(bubblewrap=True, uid="", landlock_abi=1, seccomp="").predicted().gaps == ()


@pytest.mark.sandbox
@pytest.mark.skipif(os.geteuid() != 0, reason="the uid layer is given only by a grader running as root")
@pytest.mark.skipif(not shutil.which("bwrap"), reason="bubblewrap is not installed")
def test_grade_submit_says_which_layer_it_lacked_and_how_to_give_it(mini_course: Path, tmp_path: Path, monkeypatch):
    if os.environ.get("GRADE_NO_BWRAP"):
        pytest.skip("the uid layer is required without bubblewrap: grading is refused there, saying why")
    closed, inside = closed_file(tmp_path)
    real = isolation.runtime_files
    monkeypatch.setattr(isolation, "runtime_files", lambda: (*real(), str(inside)))
    workspace = tmp_path / "work"
    shutil.copytree(mini_course / "reference" / "mini", workspace, ignore=shutil.ignore_patterns("tests"))
    result = CliRunner().invoke(main, ["--course", str(mini_course), "submit", "mini", "--workspace", str(workspace),
                                       "--student", "ann", "--no-record"])
    assert result.exit_code == 0, result.output
    notes = [line for line in result.output.splitlines() if line.startswith("note: the sandbox ran without")]
    assert len(notes) == 1, result.output
    command = notes[0].split("`")[1]
    assert "its uid layer" in notes[0] and command.startswith("chmod o+x ") and command.endswith(str(closed))
    assert command.split()[2:] == list(uids.closed_folders((str(inside),)))  # every closed folder, at once
