"""Shared fixtures of the grader's own test suite."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import torch

# Triton reads TRITON_INTERPRET when triton.language is first imported (its own helpers are
# kernels too): without a GPU, every kernel this process defines must be an interpreted one,
# whichever test imports Triton first.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

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
