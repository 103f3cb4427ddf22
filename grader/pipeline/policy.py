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


def inspect_host(course: Course, settings: CourseSettings, switches: SandboxSwitches | None = None) -> HostReport:
    """Start one worker here and report each layer it got (for `grade sandbox`)."""
    from grader.sandbox.client import Sandbox, SandboxUnavailable
    from grader.sandbox.limits import SandboxLimits

    settings = settings.sandbox
    with Sandbox({"probe.py": b""}, ["probe.py"], uid_range=settings.uid_range,
                 limits=SandboxLimits(submission_budget_s=180),
                 protected=(str(course.root),), switches=switches) as box:
        try:
            confirmed = box.wait_ready()
        except SandboxUnavailable as exc:
            return HostReport((f"no worker could be started: {exc}",), str(exc))
    lines = [f"level: {confirmed.level}"]
    for name in LAYER_ORDER:
        if name in confirmed.layers:
            lines.append(f"  ✓ {name}: {confirmed.details.get(name, 'on')}")
        elif name in confirmed.missing:
            lines.append(f"  ✗ {name}: {confirmed.missing[name]}")
    reason = refusal(confirmed, settings)
    lines.append(f"required for an official grade: {settings.required_text()}")
    lines.append("official grades: refused" if reason else "official grades: allowed")
    return HostReport(tuple(lines), reason)
