"""The sandbox policy: course settings, the refusal of an official grade, the override, `grade sandbox`."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.cli.main import main
from grader.core.errors import SettingsError
from grader.core.settings import SandboxSettings, load_settings, parse_level
from grader.pipeline.policy import refusal
from grader.sandbox.isolation import Isolation
from grader.storage.gradebook import Gradebook
from tests.conftest import ROOT, copy_mini_course

FULL = ("process", "uid", "landlock", "seccomp", "reaper")


def test_default_requirement_and_levels():
    settings = SandboxSettings()
    assert settings.required_text() == "bubblewrap or process+uid+landlock+seccomp+reaper"
    assert refusal(Isolation(FULL), settings) is None
    assert refusal(Isolation(("bubblewrap", "landlock", "reaper")), settings) is None
    reason = refusal(Isolation(("process", "landlock", "seccomp", "reaper"),
                               missing={"uid": "the grader is not root", "bubblewrap": "bwrap is not installed"}),
                     settings)
    assert reason.startswith("refusing an official grade: the sandbox here is process+landlock+seccomp+reaper")
    assert "bubblewrap lacks bubblewrap (bwrap is not installed)" in reason
    assert "process+uid+landlock+seccomp+reaper lacks uid (the grader is not root)" in reason
    assert reason.endswith("pass --allow-weak-sandbox to grade anyway (the result records it)")
    assert "\n" not in reason


@pytest.mark.parametrize("text, problem", [
    ("[sandbox]\nrequire = []\n", "non-empty list"),
    ("[sandbox]\nrequire = ['process+chroot']\n", "unknown: chroot"),
    ("[sandbox]\nuid_range = [10, 20]\n", "unprivileged uids"),
    ("[sandbox]\nuid_range = [70000, 60000]\n", "first <= last"),
    ("[sandbox]\nrequired = ['bubblewrap']\n", "unknown [sandbox] key(s) required"),
    ("[grading]\n", "unknown table(s) grading"),
    ("[sandbox\n", "not valid TOML"),
])
def test_bad_course_settings_are_one_clear_error(tmp_path, text, problem):
    (tmp_path / "course.toml").write_text(text)
    with pytest.raises(SettingsError, match=re.escape(problem)):
        load_settings(tmp_path)


def test_course_settings_are_read(tmp_path):
    (tmp_path / "course.toml").write_text("[sandbox]\nrequire = ['process+reaper']\nuid_range = [61000, 61099]\n")
    settings = load_settings(tmp_path).sandbox
    assert settings.require == (parse_level("process+reaper", "x"),) and settings.uid_range == (61000, 61099)
    assert load_settings(tmp_path / "missing").sandbox == SandboxSettings()


@pytest.fixture
def course(tmp_path) -> Path:
    """A copy of the tiny course whose reference/mini also holds the quiz answers."""
    root = tmp_path / "course"
    copy_mini_course(root)
    (root / "reference" / "mini" / "answers.toml").write_text("row_sum = 1\nratio = 1.43\n")
    return root


def weak_host(monkeypatch) -> None:
    """A host like a container run by a non-root user: no namespaces, no uid of its own."""
    monkeypatch.setenv("GRADE_NO_BWRAP", "1")
    monkeypatch.setenv("GRADE_SANDBOX_WITHOUT", "uid")


def test_submit_refuses_an_official_grade_below_the_requirement(course, monkeypatch, tmp_path):
    weak_host(monkeypatch)
    gradebook = tmp_path / "gb.sqlite"
    result = CliRunner().invoke(main, ["--course", str(course), "submit", "mini", "--workspace",
                                       str(course / "reference" / "mini"), "--student", "s1",
                                       "--gradebook", str(gradebook), "--json", str(tmp_path / "r.json")])
    assert result.exit_code == 4, result.output
    message = result.output.strip().splitlines()
    assert len(message) == 1 and "uid (turned off by GRADE_SANDBOX_WITHOUT)" in message[0]
    assert "--allow-weak-sandbox" in message[0]
    assert not gradebook.exists() and not (tmp_path / "r.json").exists()


@pytest.mark.sandbox
def test_the_override_grades_and_is_recorded(course, monkeypatch, tmp_path):
    weak_host(monkeypatch)
    gradebook = tmp_path / "gb.sqlite"
    result = CliRunner().invoke(main, ["--course", str(course), "submit", "mini", "--workspace",
                                       str(course / "reference" / "mini"), "--student", "s1",
                                       "--gradebook", str(gradebook), "--json", str(tmp_path / "r.json"),
                                       "--allow-weak-sandbox"])
    assert result.exit_code == 0, result.output
    with Gradebook(gradebook) as book:
        record = book.submissions("mini", "s1")[0].result
    assert record.sandbox_override and record.isolation_level == "process+landlock+seccomp+reaper"
    assert any("graded with --allow-weak-sandbox" in note for note in record.notes)
    data = json.loads((tmp_path / "r.json").read_text())
    assert "graded with --allow-weak-sandbox" in data["output"]


def test_batch_refuses_before_grading_anyone(course, monkeypatch, tmp_path):
    weak_host(monkeypatch)
    submissions = tmp_path / "class"
    submissions.mkdir()
    shutil.copytree(course / "reference" / "mini", submissions / "s1")
    gradebook = tmp_path / "gb.sqlite"
    result = CliRunner().invoke(main, ["--course", str(course), "batch", "mini", str(submissions),
                                       "--gradebook", str(gradebook), "--jobs", "1"])
    assert result.exit_code == 4 and "refusing an official grade" in result.output
    with Gradebook(gradebook) as book:
        assert book.count("submissions") == 0 and book.count("batch_errors") == 0


@pytest.mark.sandbox
def test_a_course_may_accept_a_weaker_level(course, monkeypatch, tmp_path):
    weak_host(monkeypatch)
    (course / "course.toml").write_text('[sandbox]\nrequire = ["process+landlock+seccomp+reaper"]\n')
    result = CliRunner().invoke(main, ["--course", str(course), "submit", "mini", "--workspace",
                                       str(course / "reference" / "mini"), "--student", "s1", "--no-record",
                                       "--html", str(tmp_path / "r.html")])
    assert result.exit_code == 0, result.output
    assert "Total: 100 / 100" in result.output


@pytest.mark.sandbox
def test_check_runs_at_any_level_and_says_which(course, monkeypatch):
    weak_host(monkeypatch)
    result = CliRunner().invoke(main, ["--course", str(course), "check", "mini", "--workspace",
                                       str(course / "reference" / "mini")])
    assert "sandbox: process+landlock+seccomp+reaper" in result.output


@pytest.mark.sandbox
def test_grade_sandbox_reports_each_layer(course, monkeypatch):
    weak_host(monkeypatch)
    weak = CliRunner().invoke(main, ["--course", str(course), "sandbox"])
    assert weak.exit_code == 4
    assert "✗ uid: turned off by GRADE_SANDBOX_WITHOUT" in weak.output and "official grades: refused" in weak.output
    monkeypatch.delenv("GRADE_SANDBOX_WITHOUT")
    from grader.pipeline.policy import host_isolation
    from grader.sandbox.uids import DEFAULT_UID_RANGE

    if {"uid", "landlock", "seccomp"} - set(host_isolation(DEFAULT_UID_RANGE).layers):
        pytest.skip("this host lacks a layer of the full no-namespace stack")
    full = CliRunner().invoke(main, ["--course", str(course), "sandbox"])
    assert full.exit_code == 0 and "level: process+uid+landlock+seccomp+reaper" in full.output


@pytest.mark.sandbox
def test_the_reference_scores_full_marks_at_both_levels(monkeypatch, tmp_path):
    """The acceptance check: `grade submit assignment1 --workspace reference/assignment1` = 100 at each level."""
    from grader.pipeline.policy import host_isolation
    from grader.sandbox.isolation import bwrap_works
    from grader.sandbox.uids import DEFAULT_UID_RANGE

    for level, no_bwrap in (("bubblewrap", ""), ("process", "1")):
        monkeypatch.setenv("GRADE_NO_BWRAP", no_bwrap)
        if level == "bubblewrap" and not bwrap_works():
            continue
        if level == "process" and {"uid", "landlock", "seccomp"} - set(host_isolation(DEFAULT_UID_RANGE).layers):
            continue
        result = CliRunner().invoke(main, ["--course", str(ROOT), "submit", "assignment1", "--workspace",
                                           str(ROOT / "reference" / "assignment1"), "--student", "demo",
                                           "--no-record", "--html", str(tmp_path / f"{level}.html")])
        assert result.exit_code == 0, result.output
        assert "Total: 100 / 100" in result.output and f"sandbox: {level}+" in result.output
