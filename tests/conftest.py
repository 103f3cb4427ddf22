"""Shared fixtures of the grader's own test suite."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
MINI_COURSE = FIXTURES / "mini_course"
FAULTS = FIXTURES / "faults"


@pytest.fixture
def mini_course(tmp_path: Path) -> Path:
    """A private copy of the tiny course (so gradebooks and reports stay in tmp)."""
    target = tmp_path / "course"
    shutil.copytree(MINI_COURSE, target)
    return target


@pytest.fixture(scope="session")
def course_root() -> Path:
    return ROOT
