"""A worker process as the trusted side sees it from outside: its wait status, its memory, its pid.

Read from the supervisor's status pipe and from /proc, never from what the worker says
of itself; `describe_status` puts a wait status in words a student can act on.
"""

from __future__ import annotations

import os
import select
import signal
import time

from grader.sandbox import uids
from grader.sandbox.supervisor import descendants

STOP_TIMEOUT_S = 10.0  # how long a stopping worker, supervisor or template gets before it is killed


def signal_name(code: int) -> str:
    try:
        return signal.Signals(code).name
    except ValueError:
        return f"signal {code}"


def drain_status(fd: int, deadline: float) -> tuple[int | None, bool, int | None]:
    """Read the supervisor's status pipe to its end ("pid N", then "disk B" when the worker's folder
    was at its write budget, then "exit S" when it is done): the worker's wait status if it wrote one,
    whether the supervisor finished in time, and the bytes the folder held if it was at the budget."""
    data = b""
    ended = False
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            break
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            ended = True
            break
        data += chunk
    status = held = None
    for line in data.decode(errors="replace").splitlines():
        word, _, value = line.partition(" ")
        if word == "exit" and value.lstrip("-").isdigit():
            status = int(value)
        elif word == "disk" and value.isdigit():
            held = int(value)
    return status, ended, held


def status_field(pid: int, key: str) -> str | None:
    """The value of one line of /proc/<pid>/status (None when the process or the line is gone)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def status_bytes(pid: int, key: str) -> int | None:
    """A VmRSS/VmHWM-style line of /proc/<pid>/status, in bytes."""
    value = status_field(pid, key)
    try:
        return int(value.split()[0]) * 1024 if value else None
    except (ValueError, IndexError):
        return None


def wait_gone(pid: int, deadline: float) -> bool:
    """Wait until `pid` has ended (gone from /proc, or a zombie); False if it is still running at
    `deadline`. A nested worker's first process ends only after its PID namespace's init, which the
    kernel lets end only once every other process of that namespace has: so all of it is gone."""
    while True:
        state = status_field(pid, "State")
        if state is None or state.startswith("Z"):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.002)


def host_pid(reported: int, uid: int | None, namespaced: bool) -> int | None:
    """The worker's pid as this process sees it (under bubblewrap it reports its namespace's pid)."""
    if not namespaced:
        return reported if reported > 0 else None
    if uid is None:
        return None
    for pid in uids.processes_of(uid):
        nspid = ns_pids(pid)
        if len(nspid) > 1 and nspid[-1] == str(reported):
            return pid
    return None


def ns_pids(pid: int) -> list[str]:
    """The pids `pid` has in each PID namespace it is in, outermost first (/proc's NSpid)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            return next((line.split()[1:] for line in fh if line.startswith("NSpid:")), [])
    except OSError:
        return []


def host_pid_below(root: int, ns_pid: int, level: int) -> int | None:
    """The host's pid of the process below `root` whose pid is `ns_pid` in a PID namespace `level`
    deep (its innermost one: a worker forked from a template inside bubblewrap reports its own pid
    at level 2, its template's fork is at level 1)."""
    for pid in descendants(root):
        chain = ns_pids(pid)
        if len(chain) == level + 1 and chain[level] == str(ns_pid):
            return pid
    return None


def describe_status(status: int | None, student_code_ran: bool = True) -> str:
    """A worker's wait status in words a student can act on (`student_code_ran`: after its files were imported)."""
    if status is None:
        return "stopped answering"
    if os.WIFSIGNALED(status):
        name = signal_name(os.WTERMSIG(status))
        if name == "SIGXCPU":
            return "used up its CPU-time limit (SIGXCPU)"
        if name == "SIGKILL":
            return "was killed (SIGKILL): most likely the memory limit"
        if name == "SIGSEGV":
            return "crashed with a segmentation fault (SIGSEGV)"
        return f"was killed by {name}"
    if not student_code_ran:
        return f"exited with code {os.WEXITSTATUS(status)} before any student file was imported"
    return f"exited with code {os.WEXITSTATUS(status)} (os._exit or a hard exit in your code)"
