"""Hazards only a GPU shows, exercised on the CPU through the same code paths.

A kernel that reads out of bounds on a GPU leaves a sticky CUDA error: the process's context
is lost and every later call in it would fail with the same error. The worker recognises such
an error, reports it against the call that caused it and ends; the next call runs in a fresh
worker. Here a student function raises the error text torch raises, in a real sandboxed worker,
at both sandbox levels.
"""

from __future__ import annotations

import pytest
import torch

from grader.harness.runners import SandboxRunner
from grader.sandbox.client import Sandbox
from grader.sandbox.limits import SandboxLimits
from grader.sandbox.worker import sticky_cuda_error

FAULTING = b'''import os
_calls = [0]

def kernel(x):
    _calls[0] += 1
    if x.shape[0] == 3:
        raise RuntimeError("CUDA error: an illegal memory access was encountered\\n"
                           "CUDA kernel errors might be asynchronously reported at some other API call")
    return x + _calls[0]

def plain_error(x):
    raise RuntimeError("shapes do not match")
'''


def test_sticky_cuda_errors_are_told_from_ordinary_ones():
    assert sticky_cuda_error(RuntimeError("CUDA error: an illegal memory access was encountered"))
    assert sticky_cuda_error(RuntimeError("Triton Error [CUDA]: misaligned address"))
    assert sticky_cuda_error(RuntimeError("CUDA error: device-side assert triggered"))
    assert not sticky_cuda_error(RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert not sticky_cuda_error(ValueError("illegal memory access"))  # only the runtime's own error type
    assert not sticky_cuda_error(RuntimeError("shapes do not match"))


@pytest.mark.sandbox
def test_a_sticky_cuda_error_ends_the_worker_and_counts_against_its_call(level):
    with Sandbox({"k.py": FAULTING}, ["k.py"], limits=SandboxLimits(call_timeout_s=60)) as box:
        runner = SandboxRunner(box)
        first = runner.call("kernel", (torch.zeros(2),), {})
        assert first.status == "ok" and first.value.tolist() == [1.0, 1.0]  # the first call in this worker
        faulted = runner.call("kernel", (torch.zeros(3),), {})
        assert faulted.status == "crashed" and "ends the process" in faulted.detail
        assert "outside a tensor" in faulted.detail  # what to change: the loads and stores' masks
        after = runner.call("kernel", (torch.zeros(2),), {})
        assert after.status == "ok" and after.value.tolist() == [1.0, 1.0]  # a fresh worker: its first call
        again = runner.call("kernel", (torch.zeros(3),), {})
        assert again.status == "crashed_before"  # the faulting shapes are not run again
        ordinary = runner.call("plain_error", (torch.zeros(2),), {})
        assert ordinary.status == "raised"  # an ordinary error keeps the worker
        kept = runner.call("kernel", (torch.zeros(2),), {})
        assert kept.value.tolist() == [2.0, 2.0]  # the same worker as before the ordinary error
