"""The resource limits of a sandbox worker, with their defaults: the one place they live.

An assignment's `[limits]` table (grader.core.manifest) sets any of them by
these names; `Sandbox` takes one `SandboxLimits` and hands the worker's share
(memory, CPU time, file size, processes, the write budget) to it in its `WorkerSpec`.

The write budget is what a worker may hold in its folder, all files together (its submission's
files, its home and temporary folder included), measured by `folder_bytes`: each file's allocated
blocks, each entry at least one block. Under bubblewrap the folder is a tmpfs of that size; at the
no-namespace level the supervisor measures it (grader.sandbox.supervisor). Standard library only:
this module runs in the sandbox's runtime copy.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

WORKER_TORCH_THREADS = 1  # torch's intra-op threads in a worker; the reference is timed with as many


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of the sandbox worker (per call and per submission)."""

    call_timeout_s: float = 30.0  # one call of student code
    submission_budget_s: float = 600.0  # wall-clock time of all calls of one submission, start-up included
    memory_mb: int = 8192  # address space of the worker (not set where a GPU is used)
    cpu_time_s: int = 900  # RLIMIT_CPU of the worker
    file_size_mb: int = 64  # the largest file the worker may write
    write_budget_mb: int = 256  # all the worker's files together (see `folder_bytes`)
    max_processes: int = 256  # processes of the worker's uid
    output_cap_kb: int = 64  # what the student's code prints, kept per call
    max_reply_mb: int = 256  # the largest reply the trusted side reads from the worker


BLOCK = 4096  # what an entry costs at least: a file, a folder or a link
WRITE_BUDGET_EXIT = 75  # the worker's exit code when it finds its folder at its write budget


def file_size_limit(file_size_mb: int, write_budget_mb: int) -> int:
    """RLIMIT_FSIZE in bytes: no one file larger than the per-file limit or the whole budget."""
    return min(file_size_mb, write_budget_mb) * 1024 * 1024


def folder_bytes(path: str, stop_at: int | None = None) -> int:
    """What the folder `path` holds on its file system: each inode once (hard links are one file),
    its allocated blocks or one BLOCK, whichever is more; links are not followed, and a folder made
    unreadable is made readable to its owner again (the measurer is the worker's uid or root). Stops counting
    once `stop_at` is reached (the answer is then at least that). 0 when `path` is gone."""
    total, seen, folders = 0, set(), [path]
    while folders:
        folder = folders.pop()
        try:
            entries = os.scandir(folder)
        except PermissionError:  # a folder the worker made unreadable: its owner (or root) opens it again
            try:
                os.chmod(folder, stat.S_IMODE(os.lstat(folder).st_mode) | stat.S_IRWXU)
                entries = os.scandir(folder)
            except OSError:
                continue
        except OSError:
            continue
        with entries:
            for entry in entries:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if (info.st_dev, info.st_ino) in seen:
                    continue
                seen.add((info.st_dev, info.st_ino))
                total += max(BLOCK, getattr(info, "st_blocks", 0) * 512)
                if stat.S_ISDIR(info.st_mode):
                    folders.append(entry.path)
                if stop_at is not None and total >= stop_at:
                    return total
    return total
