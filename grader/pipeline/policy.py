"""Whether a sandbox level may give an official grade (pure).

`grade submit`, `grade batch` and the Gradescope autograder refuse an official
grade when the worker's level does not hold every layer of at least one level
the course requires (grader.core.settings); `--allow-weak-sandbox` grades anyway,
and the result records that it did. `grade check` runs at whatever level
exists and says which.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from grader.core.assignment import Assignment
from grader.core.course import Course
from grader.core.errors import SandboxRefused
from grader.core.settings import CourseSettings, SandboxSettings
from grader.sandbox import isolation as layers
from grader.sandbox import uids
from grader.sandbox.isolation import LAYER_ORDER, Isolation, SandboxSwitches

OVERRIDE_FLAG = "--allow-weak-sandbox"


def refusal(isolation: Isolation, settings: SandboxSettings) -> str | None:
    """None when `isolation` meets a required level, else the one-line reason to refuse."""
    layers = set(isolation.layers)
    if any(level <= layers for level in settings.require):
        return None
    gaps = []
    for level in settings.require:
        names = [name for name in LAYER_ORDER if name in level - layers]
        missing = ", ".join(f"{name} ({isolation.missing.get(name, 'not available here')})" for name in names)
        gaps.append(f"{'+'.join(n for n in LAYER_ORDER if n in level)} lacks {missing}")
    return (f"refusing an official grade: the sandbox here is {isolation.level}, below every level the course "
            f"requires ({'; '.join(gaps)}); pass {OVERRIDE_FLAG} to grade anyway (the result records it)")


def host_isolation(uid_range: tuple[int, int], switches: SandboxSwitches | None = None) -> Isolation:
    """The level a worker would get on this host now (predicted from cheap probes)."""
    slot = None
    if os.geteuid() == 0:
        try:
            slot = uids.claim(uid_range)
        except (OSError, RuntimeError):
            slot = None
    try:
        return layers.host_layers(slot.uid if slot else None, switches).predicted()
    finally:
        if slot is not None:
            slot.release()


def require_sandbox(assignment: Assignment) -> None:
    """Raise SandboxRefused when this host cannot give the course's required level."""
    settings = assignment.settings.sandbox
    reason = refusal(host_isolation(settings.uid_range, assignment.switches), settings)
    if reason is not None:
        raise SandboxRefused(reason)


@dataclass(frozen=True)
class HostReport:
    lines: tuple[str, ...]
    refusal: str | None


# What `grade sandbox` runs in its worker on a GPU host: a tensor computed on the GPU and a Triton
# kernel compiled and launched there (the compiler and its cache work inside the fences), and which
# NVIDIA device files the worker can open.
CUDA_PROBE = b'''import os

def _opens(path):
    try:
        os.close(os.open(path, os.O_RDWR | os.O_CLOEXEC))
    except OSError:
        return False
    return True

def cuda_probe():
    import torch
    report = {"dev": [name for name in [f"nvidia{i}" for i in range(16)] + ["nvidiactl", "nvidia-uvm"]
                      if _opens(os.path.join("/dev", name))]}
    if not torch.cuda.is_available():
        return {**report, "error": "torch.cuda.is_available() is False inside the worker"}
    report["device"] = torch.cuda.get_device_name()
    x = torch.arange(8.0, device="cuda")
    if float((x * 2).sum().cpu()) != 56.0:
        return {**report, "error": "a tensor computed on the GPU came back wrong"}
    try:
        import triton
        import triton.language as tl

        @triton.jit
        def _double(X, Y, N: tl.constexpr):
            offsets = tl.arange(0, N)
            tl.store(Y + offsets, tl.load(X + offsets) * 2)

        y = torch.empty_like(x)
        _double[(1,)](x, y, N=8)
        if float(y.sum().cpu()) != 56.0:
            return {**report, "error": "a Triton kernel ran on the GPU but wrote wrong values"}
    except Exception as exc:
        return {**report, "error": f"a Triton kernel could not be compiled or launched: {type(exc).__name__}: "
                                   f"{str(exc)[:300]}"}
    return report
'''


def _cuda_line(box) -> str:
    """`grade sandbox`'s line about CUDA inside the worker (the worker's own report: a hint, shown)."""
    if not box.use_gpu:
        return "  - cuda: no CUDA device on this host (kernels are timed elsewhere; interpreted here)"
    result = box.call("cuda_probe", (), {}, device="cuda", timeout_s=150)
    value = result.value if result.status == "ok" and isinstance(result.value, dict) else {}
    files = ", ".join(value.get("dev", [])) or "none"
    if result.status != "ok":
        detail = result.detail or (result.error or {}).get("message", "")
        return f"  ✗ cuda: the probe {result.status} in the worker: {detail}"[:500]
    if "error" in value:
        return f"  ✗ cuda: {value['error']} (device files: {files})"
    return f"  ✓ cuda: {value.get('device')}: a tensor and a Triton kernel ran in the worker (device files: {files})"


def inspect_host(course: Course, settings: CourseSettings, switches: SandboxSwitches | None = None) -> HostReport:
    """Start one worker here and report each layer it got, and on a GPU host whether CUDA and Triton
    work inside it (for `grade sandbox`)."""
    from grader.sandbox.client import Sandbox, SandboxUnavailable
    from grader.sandbox.limits import SandboxLimits

    settings = settings.sandbox
    with Sandbox({"probe.py": CUDA_PROBE}, ["probe.py"], uid_range=settings.uid_range,
                 limits=SandboxLimits(submission_budget_s=180),
                 protected=(str(course.root),), switches=switches) as box:
        try:
            confirmed = box.wait_ready()
        except SandboxUnavailable as exc:
            return HostReport((f"no worker could be started: {exc}",), str(exc))
        cuda = _cuda_line(box)
    lines = [f"level: {confirmed.level}"]
    for name in LAYER_ORDER:
        if name in confirmed.layers:
            lines.append(f"  ✓ {name}: {confirmed.details.get(name, 'on')}")
        elif name in confirmed.missing:
            lines.append(f"  ✗ {name}: {confirmed.missing[name]}")
    lines.append(cuda)
    reason = refusal(confirmed, settings)
    lines.append(f"required for an official grade: {settings.required_text()}")
    lines.append("official grades: refused" if reason else "official grades: allowed")
    return HostReport(tuple(lines), reason)
