"""The worker's supervisor: a trusted parent that outlives everything it starts.

Started by the trusted side (`python -I -c ...supervisor.main(spec)`), it
becomes a child subreaper, forks the worker, and waits. Every process the
worker starts stays its descendant: an orphan (double fork, setsid) is
re-parented to the supervisor, not to init. When the worker exits, or the
trusted side closes the lifeline pipe (or dies), the supervisor kills every
descendant, reaps them, writes the worker's wait status to the status pipe
and exits. So nothing a submission starts can outlive its grading.

It also keeps the worker to its write budget (grader.sandbox.limits): at every poll it measures
the worker's folder, and a folder at the budget ends the worker as a lifeline would; its last
lines then say so ("disk N": the bytes the folder held) before the wait status. Under bubblewrap
the folder is a tmpfs of the budget's size, so nothing is written past it; at the no-namespace
level what the worker can write between two polls (POLL_S) is the overshoot, each file at most
the per-file limit.

The supervisor keeps the grader's uid while the worker drops to its own (see
layers.drop_privileges), so the worker can neither signal nor trace it; under
bubblewrap the PID namespace ends everything as well.

Standard library only: this module runs in the sandbox's runtime copy.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import sys
import time

from grader.sandbox.limits import folder_bytes

PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36
POLL_S = 0.05


def _prctl(option: int, value: int) -> bool:
    return ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) == 0


def descendants(root: int) -> list[int]:
    """Every live process below `root` (from /proc's parent links)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        fields = data[data.rfind(b")") + 2:].split()
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, frontier = [], [root]
    while frontier:
        for child in children.get(frontier.pop(), ()):
            found.append(child)
            frontier.append(child)
    return found


def _reap() -> list[tuple[int, int]]:
    reaped = []
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return reaped
        if pid == 0:
            return reaped
        reaped.append((pid, status))


def kill_descendants(deadline_s: float = 10.0) -> list[tuple[int, int]]:
    """SIGKILL the whole tree below this process until none is left; what was reaped."""
    me = os.getpid()
    reaped: list[tuple[int, int]] = []
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        tree = descendants(me)
        if not tree:
            break
        for pid in tree:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        reaped += _reap()
        time.sleep(0.002)
    return reaped + _reap()


def _close_except(keep: set[int]) -> None:
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def _child(spec_json: str) -> None:
    """The worker: fence in, then serve. Never returns."""
    from grader.sandbox.layers import WorkerSpec, drop_privileges, enter_limits, fence

    spec = WorkerSpec.from_json(spec_json)
    for number in (signal.SIGTERM, signal.SIGCHLD, signal.SIGINT):
        signal.signal(number, signal.SIG_DFL)
    status = 70
    try:
        _close_except({0, 1, 2, spec.request_fd, spec.reply_fd})
        os.chdir(spec.workdir)
        enter_limits(spec)
        applied = drop_privileges(spec)
        from grader.sandbox import worker  # imports torch, as the worker's own user

        worker.prepare()
        fenced, missing = fence(spec)
        applied.update(fenced)
        worker.main(spec.request_fd, spec.reply_fd, spec.modules, {"applied": applied, "missing": missing},
                    spec.write_budget_mb * 1024 * 1024)
    except BaseException as exc:  # the fences could not be put up: never serve without them
        try:
            sys.stderr.write(f"grader sandbox: {type(exc).__name__}: {exc}\n")
            sys.stderr.flush()
        finally:
            os._exit(status)
    os._exit(0)


def main(spec_json: str) -> None:
    """Supervise one worker. Never returns."""
    from grader.sandbox.layers import WorkerSpec

    spec = WorkerSpec.from_json(spec_json)
    stop = [False]

    def request_stop(_signum, _frame) -> None:
        stop[0] = True

    signal.signal(signal.SIGTERM, request_stop)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    worker_pid = os.fork()
    if worker_pid == 0:
        _child(spec_json)
    for fd in (spec.request_fd, spec.reply_fd):  # only the worker holds the channel
        os.close(fd)
    os.write(spec.status_fd, f"pid {worker_pid}\n".encode())
    budget = spec.write_budget_mb * 1024 * 1024
    status = None
    while status is None and not stop[0]:
        if folder_bytes(spec.workdir, stop_at=budget) >= budget:
            break  # at its write budget: end everything, and say why below
        try:
            ready, _, _ = select.select([spec.lifeline_fd], [], [], POLL_S)
        except InterruptedError:
            ready = []
        if ready:
            break  # the trusted side closed the lifeline (or died): end everything
        for pid, code in _reap():
            if pid == worker_pid:
                status = code
    for pid, code in kill_descendants():
        if pid == worker_pid and status is None:
            status = code
    line = f"exit {status}\n" if status is not None else "exit stopped\n"
    held = folder_bytes(spec.workdir)
    if held >= budget:
        line = f"disk {held}\n" + line
    try:
        os.write(spec.status_fd, line.encode())
    except OSError:
        pass
    os._exit(0)
