"""The temporary folders a grading process makes for its sandboxes (a template's runtime and slot,
a worker's own folder, a probe's), each named after the process that made it.

A process that exits closes what it made (grader.sandbox.template closes its templates, a worker
its folder); one killed first cannot, nor can one stopped while it was still making a template.
The name lets whoever ended it remove what it left: `remove_left_by(pid)` once that process is
gone (a grading pool does so for every worker it ends, the Ray executor for every actor it ends on
its own machine), or at a process's own last exit hook.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

KINDS = ("runtime", "slot", "sandbox", "probe")


def make(kind: str, parent: str | Path | None = None) -> Path:
    """A new folder of `kind` under `parent` (the temporary folder by default), named after this process."""
    if kind not in KINDS:
        raise ValueError(f"unknown sandbox folder kind {kind!r}")
    return Path(tempfile.mkdtemp(prefix=f"grade-{kind}-{os.getpid()}-", dir=parent))


def left_by(pid: int, temp: str | Path | None = None) -> list[Path]:
    """What the process `pid` made in the temporary folder `temp` (this process's by default) and has
    not removed: folders, and the files beside them (a template's log)."""
    folder = Path(temp or tempfile.gettempdir())
    return sorted(path for kind in KINDS for path in folder.glob(f"grade-{kind}-{pid}-*"))


def gone(pid: int, timeout_s: float) -> bool:
    """Whether the process `pid` has ended (waiting up to `timeout_s` for it)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:  # alive, another user's
            pass
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def remove_left_by(pid: int, temp: str | Path | None = None) -> None:
    """Remove what the process `pid` left in the temporary folder `temp` (this process's by default):
    call it once that process is gone, or from its own last exit hook."""
    for path in left_by(pid, temp):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
