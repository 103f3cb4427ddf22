"""One timing at a time per device, across every grader process on the machine.

`grade batch --jobs N` runs N submissions at once; two of them timing kernels
on one GPU together would each see the other's load. A timing holds an
exclusive lock file named after the device (the GPU's UUID, so two processes
that number GPUs differently through CUDA_VISIBLE_DEVICES still agree) for
as long as it runs. The lock belongs to the trusted process: a worker can
neither take nor break it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import torch


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


@contextlib.contextmanager
def device_lock(device: str) -> Iterator[Path]:
    """Hold the device's timing lock (waits while another grader process times on it)."""
    path = lock_folder() / f"{device_key(device)}.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield path
    finally:
        os.close(fd)
