"""Hazards only a GPU shows, exercised on the CPU through the same code paths.

A kernel that reads out of bounds on a GPU leaves a sticky CUDA error: the process's context
is lost and every later call in it would fail with the same error. The worker recognises such
an error, reports it against the call that caused it and ends; the next call runs in a fresh
worker. Here a student function raises the error text torch raises, in a real sandboxed worker,
at both sandbox levels.

A kernel whose tl.dot does not ask for IEEE products multiplies float32 tiles in TF32 on a GPU
(never in the interpreter): its float32 results miss float32's tolerance by TF32's rounding, and
the check says so.
"""

from __future__ import annotations

import pytest
import torch

from grader.core.manifest import parse_manifest
from grader.harness.runners import InProcessRunner, SandboxRunner
from grader.harness.testing import Check, GradingContext
from grader.harness.triton_api import dots_without_ieee, tf32_sized
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


TF32_KERNEL = """import triton
import triton.language as tl

@triton.jit
def _k(Q, K, V):
    s = tl.dot(q, tl.trans(k))  # TF32 on a GPU
    acc = tl.dot(p.to(v.dtype), v, input_precision="ieee")

def launch(x):
    return x
"""


def test_dots_without_ieee_are_counted_across_nested_calls():
    assert dots_without_ieee(TF32_KERNEL) == 1
    assert dots_without_ieee("tl.dot(a, tl.trans(b), input_precision='ieee') + tl.dot(a, b, allow_tf32=False)") == 0
    assert dots_without_ieee("tl.dot(tl.trans(a),\n        b)") == 1


def _kernel_check(tmp_path, device: str, source: str) -> Check:
    (tmp_path / "k.py").write_text(source)
    manifest = parse_manifest({"id": "a", "files": ["k.py"], "tasks": [
        {"id": "t", "points": 1, "functions": ["launch"], "sections": ["§24"], "requires": ["triton_launch"]}]})
    context = GradingContext(runner=InProcessRunner(tmp_path, ("k.py",)), manifest=manifest, reference={},
                             mutants=[], seed=3, device=device)
    return Check(context, "test::node", "t")


def test_a_tf32_product_on_the_gpu_is_diagnosed_as_such(tmp_path):
    torch.manual_seed(0)
    expected = torch.randn(2, 64, 32)
    tf32 = expected * (1 + 2.0 ** -11 * torch.randn_like(expected))  # TF32's rounding, about 5e-4 relative
    assert tf32_sized(tf32, expected) and not tf32_sized(expected + 1.0, expected)
    check = _kernel_check(tmp_path, "cuda", TF32_KERNEL)
    with pytest.raises(AssertionError) as info:
        check.compare(tf32, expected, what="launch", diagnose_with=("launch", (expected,), {}))
    assert "TF32" in str(info.value) and 'input_precision="ieee"' in str(info.value)
    check = _kernel_check(tmp_path, "cuda", TF32_KERNEL)
    with pytest.raises(AssertionError) as info:  # a logic mistake is not TF32's
        check.compare(expected + 1.0, expected, what="launch", diagnose_with=("launch", (expected,), {}))
    assert "TF32" not in str(info.value)
    check = _kernel_check(tmp_path, "cpu", TF32_KERNEL)
    with pytest.raises(AssertionError) as info:  # the interpreter multiplies in float32: not the cause there
        check.compare(tf32, expected, what="launch", diagnose_with=("launch", (expected,), {}))
    assert "TF32" not in str(info.value)
    ieee = TF32_KERNEL.replace("tl.dot(q, tl.trans(k))", "tl.dot(q, tl.trans(k), input_precision='ieee')")
    check = _kernel_check(tmp_path, "cuda", ieee)
    with pytest.raises(AssertionError) as info:
        check.compare(tf32, expected, what="launch", diagnose_with=("launch", (expected,), {}))
    assert "TF32" not in str(info.value)


@pytest.mark.sandbox
def test_grade_sandbox_tries_cuda_inside_the_worker(mini_course):
    from click.testing import CliRunner

    from grader.cli.main import main

    result = CliRunner().invoke(main, ["--course", str(mini_course), "sandbox"])
    cuda = [line for line in result.output.splitlines() if line.strip().split(" ", 1)[-1].startswith("cuda:")]
    assert len(cuda) == 1, result.output
    if torch.cuda.is_available():  # the worker computed on the GPU and ran a Triton kernel, or says why not
        assert cuda[0].lstrip().startswith(("✓ cuda:", "✗ cuda:")) and "device files" in cuda[0]
    else:
        assert "no CUDA device on this host" in cuda[0]


def test_a_gpu_worker_gets_only_its_own_gpus_device_files(tmp_path, monkeypatch):
    from grader.sandbox import isolation

    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("null", "zero", "full", "random", "urandom", "nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm",
                 "sda", "kvm", "fuse"):
        (dev / name).write_text("")
    monkeypatch.delenv(isolation.GPU_DEVICES_ENV, raising=False)
    own = isolation.gpu_device_files(1, str(dev))
    names = [path.rsplit("/", 1)[1] for path in own]
    assert names == ["null", "zero", "full", "random", "urandom", "nvidiactl", "nvidia-uvm", "nvidia1"]
    unknown = [path.rsplit("/", 1)[1] for path in isolation.gpu_device_files(None, str(dev))]
    assert "nvidia0" in unknown and "nvidia1" in unknown and "sda" not in unknown  # GPUs only, never the rest
    monkeypatch.setenv(isolation.GPU_DEVICES_ENV, "all")
    assert isolation.gpu_device_files(1, str(dev)) == [str(dev)]  # the staff's way back to the whole /dev
    monkeypatch.delenv(isolation.GPU_DEVICES_ENV)
    base = isolation._bwrap_base(str(tmp_path), use_gpu=True, tmp_size=256 * 1024 * 1024)
    binds = [base[i + 1] for i, word in enumerate(base) if word == "--dev-bind"]
    assert "/dev" not in binds and all(path.startswith("/dev/") for path in binds)
    assert base[base.index("--dev") + 1] == "/dev"  # bubblewrap's own minimal /dev underneath


def test_the_own_gpu_is_read_from_the_drivers_pci_entry(tmp_path):
    from grader.sandbox import isolation

    if not torch.cuda.is_available():
        assert isolation.own_gpu_minor(str(tmp_path)) is None  # no CUDA: cannot tell, every GPU file
        return
    minor = isolation.own_gpu_minor()
    assert minor is None or f"/dev/nvidia{minor}" in isolation.worker_gpu_devices()
