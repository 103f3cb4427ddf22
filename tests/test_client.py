"""The sandbox client's failure paths (grader/sandbox/client.py), with real workers.

* a worker that dies before its first message: `wait_ready` raises SandboxUnavailable
  saying what happened (its exit, and the worker's own last words), and a call
  reports it as a crash instead of raising;
* replies that break the channel: a frame that holds no dict, a frame that cannot
  be decoded, a length beyond what the grader accepts; each costs that call only,
  and the next call gets a fresh worker;
* the submission's budget: used up while the worker starts, and used up by a call,
  after which no call runs at all.

The student code that breaks the channel writes on the worker's own reply pipe, the
one write-only pipe it holds, as any submission could.
"""

from __future__ import annotations

import re

import pytest
import torch

from grader.sandbox import isolation
from grader.sandbox.client import Sandbox, SandboxUnavailable
from grader.sandbox.isolation import NO_ZYGOTE_ENV
from grader.sandbox.limits import SandboxLimits
from grader.sandbox.worker_status import describe_status
from tests.conftest import sandbox_start_s

SOURCE = b'''
import fcntl
import io
import os
import stat
import struct
import time

import torch


def _reply_pipe():
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            is_pipe = stat.S_ISFIFO(os.fstat(fd).st_mode)
            mode = fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE
        except OSError:
            continue
        if is_pipe and mode == os.O_WRONLY:
            return fd
    raise RuntimeError("no reply pipe found")


def _frame(value):
    buffer = io.BytesIO()
    torch.save(value, buffer)
    return struct.pack(">Q", len(buffer.getvalue())) + buffer.getvalue()


def not_a_dict():
    os.write(_reply_pipe(), _frame([1, 2, 3]))  # a valid frame, but not a reply
    return 1


def undecodable():
    os.write(_reply_pipe(), struct.pack(">Q", 5) + b"abcde")
    return 1


def too_long():
    os.write(_reply_pipe(), struct.pack(">Q", 1 << 40))  # claims a terabyte
    return 1


def add(a, b=1):
    return a + b


def nap(seconds):
    time.sleep(seconds)
    return 0
'''
CALL_TIMEOUT_S = 600.0  # longer than any budget below: a call is cut by the budget, not by this
MIN_BUDGET_S = 10.0  # a budget to wait out; on a busy machine, more (see budget_s)
STARTUP_BUDGET_S = 0.25  # less than any worker needs to import torch when it starts from scratch


def budget_s() -> float:
    """A submission budget a worker surely starts within here and now (three times what a start takes on
    this machine at this moment, and at least MIN_BUDGET_S), little enough to wait out."""
    return max(MIN_BUDGET_S, 3 * sandbox_start_s() + 5)


def _levels() -> list:
    bubblewrap = pytest.param("bubblewrap", marks=pytest.mark.skipif(
        not isolation.bwrap_works(), reason="bubblewrap cannot create namespaces here"))
    return ["process", bubblewrap]


@pytest.fixture(params=_levels())
def level(request) -> str:
    return request.param


@pytest.fixture
def from_scratch(level, monkeypatch) -> str:
    """The level, with every worker started from scratch (no template worker at the process level)."""
    monkeypatch.setenv(NO_ZYGOTE_ENV, "1")
    return level


def sandbox(level: str | None, **limits) -> Sandbox:
    return Sandbox({"m.py": SOURCE}, ["m.py"], isolation_level=level, use_gpu=False,
                   limits=SandboxLimits(**{"call_timeout_s": CALL_TIMEOUT_S, **limits}))


# ------------------------------------------------- a worker that never reports


@pytest.mark.sandbox
def test_a_worker_that_dies_before_its_first_message(from_scratch):
    with sandbox(from_scratch, memory_mb=64) as box:  # too little memory to import torch
        with pytest.raises(SandboxUnavailable) as raised:
            box.wait_ready()
        message = str(raised.value)
        assert message.startswith("the sandbox worker did not start: it exited with code 70 "
                                  "before any student file was imported"), message
        assert "grader sandbox: ImportError" in message  # the worker's own last words
        assert "your code" not in message  # no student code ran: nothing to blame it on
        result = box.call("add", (torch.ones(1),))  # a call reports the same, it does not raise
        assert result.status == "crashed" and result.detail.startswith("the sandbox worker did not start")


def test_describe_status_blames_student_code_only_after_it_ran():
    exit_3 = 3 << 8  # a wait status: exited with code 3
    assert describe_status(exit_3) == "exited with code 3 (os._exit or a hard exit in your code)"
    assert describe_status(exit_3, student_code_ran=False) == "exited with code 3 before any student file was imported"
    assert describe_status(None) == "stopped answering"


# -------------------------------------------------- replies that break the channel


@pytest.mark.sandbox
@pytest.mark.parametrize("name", ["not_a_dict", "undecodable", "too_long"])
def test_a_reply_that_breaks_the_channel_costs_that_call_only(level, name):
    with sandbox(level) as box:
        box.wait_ready()
        result = box.call(name)
        assert result.status == "crashed", (result.status, result.detail)
        assert result.detail == "broke the grader's channel (its reply was not a valid message)"
        assert box.restarts == 1  # that worker was ended
        again = box.call("add", (torch.ones(2),))  # a fresh worker serves the next call
        assert again.status == "ok" and torch.equal(again.value, torch.full((2,), 2.0))


# -------------------------------------------------------------------- the budget


@pytest.mark.sandbox
def test_the_budget_used_up_while_the_worker_starts(from_scratch):
    with sandbox(from_scratch, submission_budget_s=STARTUP_BUDGET_S) as box:
        with pytest.raises(SandboxUnavailable) as raised:
            box.wait_ready()
        found = re.fullmatch(r"the sandbox worker did not start: it did not answer within ([0-9.e-]+) s",
                             str(raised.value))
        assert found and float(found.group(1)) <= STARTUP_BUDGET_S, str(raised.value)  # what was left of it
        result = box.call("add", (torch.ones(1),))
        assert result.status == "budget"
        assert result.detail == f"the submission's time budget of {STARTUP_BUDGET_S:g} s is used up"
        restarts = box.restarts
        assert box.call("add", (torch.ones(1),)).status == "budget"
        assert box.restarts == restarts  # no worker is started once the budget is gone


@pytest.mark.sandbox
def test_the_budget_used_up_by_a_call():
    budget = budget_s()
    with sandbox(None, submission_budget_s=budget) as box:  # this host's default level
        first = box.call("add", (torch.ones(1),))
        assert first.status == "ok", f"the worker did not even start within the budget: {first.detail}"
        slow = box.call("nap", (3600,))
        assert slow.status == "timeout"
        waited = float(slow.detail.removeprefix("did not answer within ").removesuffix(" s"))
        assert waited < budget < CALL_TIMEOUT_S  # the call was cut at the budget, not at its own timeout
        restarts = box.restarts
        for name, args in (("add", (torch.ones(1),)), ("nap", (0,))):
            result = box.call(name, args)
            assert result.status == "budget", result
            assert result.detail == f"the submission's time budget of {budget:g} s is used up"
        assert box.restarts == restarts  # no fresh worker was started for them
