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


# The sandbox levels every attack runs at, with the layers each needs here.
STACKS = {"bubblewrap": {"bubblewrap", "landlock", "seccomp", "reaper"},
          "process": {"process", "uid", "landlock", "seccomp", "reaper"}}


@pytest.fixture(params=sorted(STACKS))
def level(request, monkeypatch) -> str:
    """Each sandbox level in turn: bubblewrap, and the no-namespace stack (GRADE_NO_BWRAP=1);
    a level that lacks one of its layers here is skipped with the reason."""
    from grader.pipeline.policy import host_isolation
    from grader.sandbox.isolation import bwrap_works
    from grader.sandbox.uids import DEFAULT_UID_RANGE

    if request.param == "bubblewrap":
        monkeypatch.delenv("GRADE_NO_BWRAP", raising=False)
        if not bwrap_works():
            pytest.skip("bubblewrap cannot create namespaces here")
    else:
        monkeypatch.setenv("GRADE_NO_BWRAP", "1")
    isolation = host_isolation(DEFAULT_UID_RANGE)
    lacking = STACKS[request.param] - set(isolation.layers)
    if request.param == "bubblewrap" and os.geteuid() == 0:
        lacking |= {"uid"} - set(isolation.layers)
    if lacking:
        reasons = "; ".join(f"{name}: {isolation.missing.get(name, 'missing')}" for name in sorted(lacking))
        pytest.skip(f"the {request.param} level lacks {reasons}")
    return request.param
