"""The install commands people copy: the README's two commands (a newcomer on a machine with or
without a GPU) and the README of a student bundle (a student working alone). Each command is taken
from the text itself and run by bash with `python`, `grade` and `nvidia-smi` replaced by stubs that
log what they were asked, so what the text makes a shell do is checked, not just what it says."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.cli.main import main
from tests.conftest import ROOT, copy_mini_course

CPU_INDEX = "--index-url https://download.pytorch.org/whl/cpu"
STUB = """#!/bin/sh
echo "${0##*/} $*" >> "$CALLS"
case "${0##*/}" in python|python3)
  if [ "$1 $2" = "-m venv" ]; then mkdir -p "$3/bin" && : > "$3/bin/activate"; fi
  if [ "$1 $2" = "-c import torch" ]; then exit 1; fi  # no torch installed yet
  if [ "$1" = "-" ]; then exit "${UNREACHABLE:-0}"; fi  # install.sh asks whether an index answers
esac
exit 0
"""


def bash_block(markdown: str, after: str) -> list[str]:
    """The command lines (comments and blanks left out) of the first ```bash block after the heading `after`."""
    section = markdown[markdown.index(after):]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return [line.strip() for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def run_with_stubs(command: str, folder: Path, *, gpu: bool | None, reachable: bool = True) -> list[str]:
    """Run `command` in bash with stub python and grade on PATH; nvidia-smi absent (gpu None), failing
    (False: the driver finds no GPU) or succeeding (True); the CPU wheel index `reachable` or not.
    The stubs' calls, in order."""
    stubs = folder / "stubs"
    stubs.mkdir(exist_ok=True)
    names = ["python", "python3", "grade"] + ([] if gpu is None else ["nvidia-smi"])
    for tool in ("mkdir", "dirname", "bash"):
        if not (stubs / tool).exists():
            (stubs / tool).symlink_to(shutil.which(tool))
    for name in names:
        text = STUB if name != "nvidia-smi" else f"#!/bin/sh\nexit {0 if gpu else 9}\n"
        (stubs / name).write_text(text)
        (stubs / name).chmod(0o755)
    calls = folder / "calls.log"
    calls.write_text("")
    env = {"PATH": str(stubs), "CALLS": str(calls), "HOME": str(folder),  # nothing else: no real nvidia-smi
           "UNREACHABLE": "0" if reachable else "1"}
    done = subprocess.run([shutil.which("bash"), "-e", "-c", command], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return calls.read_text().splitlines()


# ------------------------------------------------------------------ the README's two commands
def test_the_readme_has_two_commands_and_ci_runs_its_test_command():
    install, tests = bash_block((ROOT / "README.md").read_text(), "## Two commands")
    assert "scripts/install.sh" in install and "grade submit assignment1" in install  # installs, runs the main job
    assert "pip install" in (ROOT / "scripts" / "install.sh").read_text()
    assert tests.startswith("python -m pytest -q")
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert tests in ci  # CI runs exactly the README's test command
    # the whole suite, in parallel processes that keep each file's tests together (its shared gradings)
    assert " -m \"" not in tests and "--dist loadfile" in tests and "-n auto" in tests  # no lane chosen


def readme_checkout(tmp_path: Path) -> Path:
    """A folder with what the README's first command runs from the checkout: scripts/install.sh and
    constraints.txt (the real ones)."""
    folder = tmp_path / "checkout"
    (folder / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "install.sh", folder / "scripts" / "install.sh")
    shutil.copy(ROOT / "constraints.txt", folder / "constraints.txt")
    return folder


@pytest.mark.slow  # starts a subprocess
@pytest.mark.parametrize(("gpu", "reachable"), [(None, True), (False, True), (True, True), (None, False)],
                         ids=["no nvidia-smi", "no GPU", "a GPU", "no GPU, CPU index unreachable"])
def test_the_first_command_makes_a_venv_and_installs_the_cpu_build_of_torch_where_there_is_no_gpu(
        tmp_path: Path, gpu, reachable):
    install, _ = bash_block((ROOT / "README.md").read_text(), "## Two commands")
    folder = readme_checkout(tmp_path)
    calls = run_with_stubs(install, folder, gpu=gpu, reachable=reachable)
    venv = "python3 -m venv .venv"
    has_torch = "python -c import torch"
    probe = "python - https://download.pytorch.org/whl/cpu/torch/"
    grader = "python -m pip install -c constraints.txt -e .[dev]"
    main_job = "grade submit assignment1 --workspace reference/assignment1 --student demo"
    if gpu:
        assert calls == [venv, has_torch, grader, main_job]  # pip's default torch is the CUDA build
    elif reachable:
        assert calls == [venv, has_torch, probe, f"python -m pip install torch {CPU_INDEX}", grader, main_job]
    else:  # one line says so, and the default index serves torch with the grader
        assert calls == [venv, has_torch, probe, grader, main_job]


@pytest.mark.slow  # starts a subprocess
def test_the_install_script_says_each_choice_in_one_line(tmp_path: Path):
    folder = readme_checkout(tmp_path)
    run_with_stubs("bash scripts/install.sh > said.txt", folder, gpu=False, reachable=False)
    said = (folder / "said.txt").read_text().splitlines()
    assert len(said) == 1 and "cannot be reached: torch comes from the default index instead" in said[0]


def test_ci_runs_every_stage_and_fails_at_the_end():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "set -e" not in ci.replace("set -uo pipefail", "")  # a failing stage does not stop the others
    assert ci.count("record $?") + ci.count("record $INSTALLED") >= 4  # each stage prints its result
    assert 'echo "=== CI summary"' in ci and "exit 1" in ci.split("=== CI summary")[1]
    assert ci.count("-c constraints.txt") >= 2  # the versions the suite is green with


# ------------------------------------------------------------------ a student bundle's README
def released_readme(course: Path, tmp_path: Path) -> tuple[str, str]:
    result = CliRunner().invoke(main, ["--course", str(course), "release", "mini", "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    with zipfile.ZipFile(tmp_path / "out" / "mini.zip") as archive:
        return archive.read("mini/README.md").decode(), result.output


@pytest.mark.slow  # starts a subprocess
def test_a_bundles_readme_gives_a_student_the_commands_that_install_the_grader(tmp_path: Path):
    course = tmp_path / "course"
    copy_mini_course(course)
    readme, said = released_readme(course, tmp_path)
    commands = bash_block(readme, "## Working from this folder")
    from grader import __version__

    default = f'python -m pip install "attention-course-grader=={__version__}"'
    assert commands[-1] == default
    assert f"its README installs the grader with: {default} (the default; course.toml's [release] install" in said
    student = tmp_path / "student"
    student.mkdir()
    assert run_with_stubs("\n".join(commands), student, gpu=None) == [
        "python -m venv .venv", f"python -m pip install torch {CPU_INDEX}",
        f"python -m pip install attention-course-grader=={__version__}"]
    assert run_with_stubs("\n".join(commands), student, gpu=True) == [
        "python -m venv .venv", f"python -m pip install attention-course-grader=={__version__}"]

    own = "python -m pip install git+https://git.example.edu/attention-course.git@2026"
    (course / "course.toml").write_text(f'[release]\ninstall = "{own}"\n')
    readme, said = released_readme(course, tmp_path)
    assert bash_block(readme, "## Working from this folder")[-1] == own
    assert said.splitlines()[-1] == f"its README installs the grader with: {own}"


def test_a_release_install_that_is_not_one_command_is_refused(tmp_path: Path):
    course = tmp_path / "course"
    copy_mini_course(course)
    (course / "course.toml").write_text('[release]\ninstall = "pip install a\\nrm -rf ~"\n')
    result = CliRunner().invoke(main, ["--course", str(course), "release", "mini", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "release.install must be one command line" in result.output
    assert not os.path.exists(tmp_path / "o")
