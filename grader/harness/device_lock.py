"""One job at a time per device, across every grader process on the machine.

`grade batch --jobs N` runs N submissions at once; two of them using one GPU
together would each see the other's load: in timing, but also in compiling,
autotuning and the tests' launches. A job that grades on a GPU holds an
exclusive lock file named after the device (the GPU's UUID, so two processes
that number GPUs differently through CUDA_VISIBLE_DEVICES still agree) for all
its GPU work (grader.pipeline.grading.grade holds it from the workers' start to
their close); the timing protocol takes it again inside, which in the same
thread is re-entrant, so a timing outside a job (a benchmark) is serialised too.
The lock belongs to the trusted process: a worker can neither take nor break it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import torch

_held: dict[tuple[int, str], list[int]] = {}  # (thread, lock path) → [fd, depth] while that thread holds it
_guard = threading.Lock()


def device_key(device: str) -> str:
    """A machine-wide name for a device: the GPU's UUID, or 'cpu'."""
    if device.startswith("cuda") and torch.cuda.is_available():
        index = torch.device(device).index
        index = torch.cuda.current_device() if index is None else index
        uuid = getattr(torch.cuda.get_device_properties(index), "uuid", None)
        return f"gpu-{uuid}" if uuid is not None else f"gpu-{index}"
    return "cpu"


def lock_folder() -> Path:
    base = Path("/run") if os.access("/run", os.W_OK) else Path(tempfile.gettempdir())
    folder = base / f"grade-timing-locks-{os.geteuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder


def lock_path(device: str) -> Path:
    """The lock file of `device`."""
    return lock_folder() / f"{device_key(device)}.lock"


def held_here(device: str) -> bool:
    """Whether this thread holds `device`'s lock now."""
    return (threading.get_ident(), str(lock_path(device))) in _held


@contextlib.contextmanager
def device_lock(device: str) -> Iterator[Path]:
    """Hold the device's lock (waits while another grader process holds it). Re-entrant within
    one thread: an inner hold (the timing inside a job) neither waits for nor releases the outer one."""
    path = lock_path(device)
    key = (threading.get_ident(), str(path))
    with _guard:
        entry = _held.get(key)
        if entry is not None:
            entry[1] += 1
    if entry is not None:
        try:
            yield path
        finally:
            with _guard:
                entry[1] -= 1
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with _guard:
            _held[key] = [fd, 1]
        yield path
    finally:
        with _guard:
            _held.pop(key, None)
        os.close(fd)


@contextlib.contextmanager
def job_device_lock(device: str | None) -> Iterator[None]:
    """Hold the lock for a whole job's GPU work when it runs on a GPU; nothing on the CPU (CPU jobs
    share the machine's cores by design; only CPU timings serialise, in the timing protocol)."""
    if device is None or not device.startswith("cuda"):
        yield
        return
    with device_lock(device):
        yield
