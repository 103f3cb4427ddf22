"""A template worker: torch imported once, one fork per student.

A worker's own start-up is mostly `import torch` (about 1.2 s of the 1.3 s it
takes). The template process (started by grader.sandbox.template.Zygote, as the
grader's user, from the same private runtime copy as any worker) imports torch
and Triton once and then waits on a unix socket. For each worker the trusted
side sends the worker's spec and its pipes (SCM_RIGHTS); the template forks,
and the child becomes that worker's supervisor, exactly as an exec'd one
would: it forks the worker, which puts up every layer of its level in the same
order (rlimits, its own uid, Landlock, seccomp) before it imports a student
file. Nothing of one student is ever in the template: it holds no course file,
no reference and no student code, and each child's memory is its own copy.

At the no-namespace level the template runs as the grader's user and each
child drops to a uid of its own. Under bubblewrap the template itself runs inside
the namespaces bubblewrap made for one executor slot, as that slot's uid, and each
child first makes namespaces of its own nested in them (grader.sandbox.namespaces:
user, mount, PID, network, IPC and UTS; its own folder bound at the submission's
mount point), so that nothing a student's worker leaves reaches the next one.

The template never starts threads or touches CUDA before it forks (a CUDA
context cannot cross a fork): torch runs one thread, and the children set up
the device themselves. Standard library and torch only: this module runs in
the sandbox's runtime copy.
"""

from __future__ import annotations

import array
import json
import os
import signal
import socket
import sys

MAX_SPEC_BYTES = 1 << 20
FDS = ("request_fd", "reply_fd", "lifeline_fd", "status_fd", "output_fd")


def _preload() -> None:
    import torch

    from grader.sandbox.limits import WORKER_TORCH_THREADS

    torch.set_num_threads(WORKER_TORCH_THREADS)
    try:
        import triton  # noqa: F401
        import triton.language  # noqa: F401
    except Exception:  # no triton here: nothing to preload
        pass
    from grader.sandbox import layers, namespaces, supervisor, worker  # noqa: F401


def _receive(channel: socket.socket) -> tuple[dict, list[int]] | None:
    fds = array.array("i")
    try:
        data, ancillary, _flags, _addr = channel.recvmsg(MAX_SPEC_BYTES, socket.CMSG_SPACE(len(FDS) * fds.itemsize))
    except OSError:
        return None
    if not data:
        return None
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - (len(payload) % fds.itemsize)])
    return json.loads(data.decode()), list(fds)


def _become_supervisor(message: dict, fds: list[int], channel: socket.socket) -> None:
    """In the forked child: take the pipes, the environment and the folder of this worker (under
    bubblewrap, in namespaces of its own first)."""
    channel.close()
    for number in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT):
        signal.signal(number, signal.SIG_DFL)
    os.setsid()
    named = dict(zip(FDS, fds, strict=True))
    os.dup2(named["output_fd"], 1)
    os.dup2(named["output_fd"], 2)
    os.close(named["output_fd"])
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    spec = dict(message["spec"])
    spec.update({name: named[name] for name in FDS if name != "output_fd"})
    if message.get("nest"):
        _nest(message["nest"]["source"], spec["workdir"], spec["write_budget_mb"] * 1024 * 1024)
    os.environ.clear()
    os.environ.update(message["env"])
    os.chdir(spec["workdir"])
    from grader.sandbox.supervisor import main

    main(json.dumps(spec))


def _nest(source: str, workdir: str, size: int) -> None:
    """Namespaces of this worker's own, then the first process inside them carries on as its
    supervisor; this process only passes that one's end on (its exit code) to the template."""
    from grader.sandbox import namespaces

    try:
        namespaces.enter(source, workdir, size)
    except OSError as exc:
        sys.stderr.write(f"grader sandbox: the worker's own namespaces could not be made: {exc}\n")
        sys.stderr.flush()
        raise
    pid = os.fork()
    if pid:
        os.closerange(0, 1 << 16)  # every pipe stays with the supervisor alone
        os._exit(namespaces.wait_for(pid))
    namespaces.become_init()


def main(control_fd: int) -> None:
    """Serve spawn requests until the trusted side closes the socket. Never returns."""
    import ctypes

    ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG: it holds nothing to save
    _preload()
    channel = socket.socket(fileno=control_fd)
    signal.signal(signal.SIGCHLD, lambda *_: _reap())
    while True:
        received = _receive(channel)
        if received is None:
            os._exit(0)
        message, fds = received
        if len(fds) != len(FDS):
            for fd in fds:
                os.close(fd)
            channel.sendall(b"-1\n")
            continue
        pid = os.fork()
        if pid == 0:
            try:
                _become_supervisor(message, fds, channel)
            finally:
                os._exit(70)
        for fd in fds:
            os.close(fd)
        channel.sendall(f"{pid}\n".encode())


def _reap() -> None:
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


if __name__ == "__main__":  # pragma: no cover
    main(int(sys.argv[1]))
