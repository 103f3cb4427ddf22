"""One unprivileged user id per running worker (trusted side, root only).

When the grader runs as root, each worker runs as a user id of its own from a
configured range, with no supplementary groups. Being another user is what
keeps the worker out of the grader's /proc files (environment, memory), off
its files (the gradebook and reports are root's), unable to signal or trace
it, and unable to touch a worker of another student. A uid is claimed with
a lock file that the claiming process holds, so concurrent graders on one
machine never share one, and a crashed grader's claim ends with it.

Because a uid is used by one worker at a time, ending a worker is exact:
`sweep(uid)` kills every process of that uid, whatever it did to escape
(double fork, setsid, a new process group).
"""

from __future__ import annotations

import fcntl
import os
import random
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

DEFAULT_UID_RANGE = (60000, 60999)
_KILL_ALL = ("import os, signal\ntry:\n    os.kill(-1, signal.SIGKILL)\nexcept ProcessLookupError:\n    pass\n")


@dataclass
class UidSlot:
    """A claimed uid (its gid is the same number); hold it while the worker lives."""

    uid: int
    lock_fd: int

    @property
    def gid(self) -> int:
        return self.uid

    def release(self) -> None:
        if self.lock_fd >= 0:
            os.close(self.lock_fd)  # closing the descriptor drops the lock
            self.lock_fd = -1


def lock_dir() -> Path:
    """A folder only root can write, for the claim locks."""
    base = Path("/run") if os.access("/run", os.W_OK) else Path(tempfile.gettempdir())
    folder = base / "grade-sandbox-uids"
    folder.mkdir(mode=0o755, exist_ok=True)
    info = folder.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
        raise PermissionError(f"{folder} is not a folder only this user can write")
    return folder


def processes_of(uid: int) -> list[int]:
    """Live pids whose real uid is `uid` (from /proc; zombies, which can do nothing, are left out)."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status", "rb") as fh:
                fields = dict(line.split(b":", 1) for line in fh if b":" in line)
            if int(fields[b"Uid"].split()[0]) == uid and not fields[b"State"].strip().startswith(b"Z"):
                found.append(int(entry.name))
        except (OSError, ValueError, KeyError):
            continue
    return found


def sweep(uid: int, rounds: int = 5) -> int:
    """Kill every process of `uid`; returns how many there were at first."""
    first = len(processes_of(uid))
    for _ in range(rounds):
        if not processes_of(uid):
            break
        # kill(-1) sent *as that uid* reaches exactly its processes, atomically.
        subprocess.run([sys.executable, "-I", "-S", "-c", _KILL_ALL], user=uid, group=uid, extra_groups=[],
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=30, check=False)
        time.sleep(0.01)
    return first


def claim(uid_range: tuple[int, int] = DEFAULT_UID_RANGE) -> UidSlot:
    """A uid from `uid_range` that no other worker on this machine is using."""
    low, high = uid_range
    folder = lock_dir()
    candidates = list(range(low, high + 1))
    random.shuffle(candidates)
    for uid in candidates:
        fd = os.open(folder / f"{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        sweep(uid)  # leftovers of a grader that crashed while holding this uid
        return UidSlot(uid, fd)
    raise RuntimeError(f"every uid in {low}-{high} is in use by another worker")


def closed_folders(paths: tuple[str, ...]) -> tuple[str, ...]:
    """Every folder closed to other users on the way to the interpreter or one of `paths`, outermost first."""
    found: dict[str, None] = {}
    for path in (sys.executable, *paths):
        current = Path("/")
        for part in Path(os.path.realpath(path)).parts[1:-1]:
            current = current / part
            try:
                closed = not current.stat().st_mode & stat.S_IXOTH
            except OSError:
                break
            if closed:
                found[str(current)] = None
    return tuple(found)


_REACHABLE: dict[tuple[str, ...], str] = {}


def runtime_reachable(uid: int, paths: tuple[str, ...]) -> str:
    """'' when `uid` can read every file in `paths` (the interpreter, torch...), else why not.

    Asked once per process: every uid of the range is alike (no passwd entry, no
    groups), so the answer for one is the answer for all."""
    if paths not in _REACHABLE:
        _REACHABLE[paths] = _probe_reachable(uid, paths)
    return _REACHABLE[paths]


def _probe_reachable(uid: int, paths: tuple[str, ...]) -> str:
    probe = "import sys\nfor p in sys.argv[1:]:\n    open(p, 'rb').close()\n"
    try:
        result = subprocess.run([sys.executable, "-I", "-S", "-c", probe, *paths], user=uid, group=uid,
                                extra_groups=[], stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
        if result.returncode == 0:
            return ""
        problem = result.stderr.decode(errors="replace").strip().splitlines()[-1:]
    except (OSError, subprocess.SubprocessError) as exc:
        problem = [f"{type(exc).__name__}: {exc}"]
    blocking = " ".join(closed_folders(paths))
    if blocking:
        return (f"uid {uid} cannot reach the Python installation: {blocking} is closed to other users "
                f"(make it traversable with chmod o+x {blocking}, or install Python elsewhere)")
    return f"uid {uid} cannot read the Python installation ({' '.join(problem)[-200:]})"


IPC_TABLES = {"shm": ("shmctl", 1), "msg": ("msgctl", 1), "sem": ("semctl", 1)}  # /proc/sysvipc/<t>: id column
IPC_RMID = 0
MQUEUE_DIR = Path("/dev/mqueue")


def ipc_objects_of(uid: int) -> dict[str, list[int]]:
    """The System V IPC objects (shared memory, message queues, semaphore sets) that `uid` owns or
    created, by table: their ids, from /proc/sysvipc (this IPC namespace's)."""
    found: dict[str, list[int]] = {}
    for table, (_call, id_column) in IPC_TABLES.items():
        try:
            lines = Path(f"/proc/sysvipc/{table}").read_text().splitlines()
        except OSError:
            continue
        header = lines[0].split() if lines else []
        owners = [header.index(name) for name in ("uid", "cuid") if name in header]
        for line in lines[1:]:
            fields = line.split()
            try:
                if any(int(fields[i]) == uid for i in owners):
                    found.setdefault(table, []).append(int(fields[id_column]))
            except (IndexError, ValueError):
                continue
    return found


def sweep_ipc(uid: int) -> int:
    """Remove every System V IPC object and POSIX message queue that `uid` left; how many there were.

    The seccomp layer refuses to create them at all; this is for a host without it, so that
    nothing one student leaves reaches the next worker that runs as the same uid."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    removed = 0
    for table, ids in ipc_objects_of(uid).items():
        call = getattr(libc, IPC_TABLES[table][0])
        for ipc_id in ids:
            args = (ipc_id, 0, IPC_RMID, None) if table == "sem" else (ipc_id, IPC_RMID, None)
            removed += call(*args) == 0
    if MQUEUE_DIR.is_dir():
        for entry in MQUEUE_DIR.iterdir():
            try:
                if entry.lstat().st_uid == uid:
                    entry.unlink()
                    removed += 1
            except OSError:
                continue
    return removed
