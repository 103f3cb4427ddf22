"""Whether a sandbox level may give an official grade (pure).

`grade submit`, `grade batch` and the Gradescope autograder refuse an official
grade when the worker's level does not hold every layer of at least one level
the course requires (grader.settings); `--allow-weak-sandbox` grades anyway,
and the result records that it did. `grade check` runs at whatever level
exists and says which.
"""

from __future__ import annotations

import os

from grader.course import Course
from grader.errors import SandboxRefused
from grader.sandbox import isolation as layers
from grader.sandbox import uids
from grader.sandbox.isolation import LAYER_ORDER, Isolation
from grader.settings import SandboxSettings, load_settings

OVERRIDE_FLAG = "--allow-weak-sandbox"


def refusal(isolation: Isolation, settings: SandboxSettings) -> str | None:
    """None when `isolation` meets a required level, else the one-line reason to refuse."""
    layers = set(isolation.layers)
    if any(level <= layers for level in settings.require):
        return None
    closest = min(settings.require, key=lambda level: (len(level - layers), sorted(level)))
    gaps = [name for name in LAYER_ORDER if name in closest - layers]
    reasons = "; ".join(f"{name}: {isolation.missing.get(name, 'not available here')}" for name in gaps)
    return (f"refusing an official grade: the sandbox here is {isolation.level}, but the course requires "
            f"{settings.required_text()} (missing {reasons}); pass {OVERRIDE_FLAG} to grade anyway "
            f"(the result records it)")


def host_isolation(uid_range: tuple[int, int]) -> Isolation:
    """The level a worker would get on this host now (predicted from cheap probes)."""
    slot = None
    if os.geteuid() == 0:
        try:
            slot = uids.claim(uid_range)
        except (OSError, RuntimeError):
            slot = None
    try:
        return layers.host_layers(slot.uid if slot else None).predicted()
    finally:
        if slot is not None:
            slot.release()


def require_sandbox(course: Course) -> None:
    """Raise SandboxRefused when this host cannot give the course's required level."""
    settings = load_settings(course.root).sandbox
    reason = refusal(host_isolation(settings.uid_range), settings)
    if reason is not None:
        raise SandboxRefused(reason)
