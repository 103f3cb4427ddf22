"""The trusted side's handle on a template worker (grader.sandbox.zygote is the template itself).

One template per kind of worker (CPU or GPU, and at the no-namespace level or inside
bubblewrap) is started on first use and kept for the life of the process;
`Zygote.spawn` asks it to fork the supervisor of one new worker.

Under bubblewrap the template is one sandbox per executor slot (a process of a batch's
pool, a Ray actor, a lone `grade submit`): bubblewrap runs it as a uid of the slot's
own (when the grader is root), with the slot's folder of workdirs bound inside, and each
worker forked from it makes namespaces of its own (grader.sandbox.namespaces).
"""

from __future__ import annotations

import atexit
import json
import multiprocessing.util
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from grader.sandbox import isolation, scratch, uids
from grader.sandbox.limits import SandboxLimits
from grader.sandbox.supervisor import descendants
from grader.sandbox.worker_status import STOP_TIMEOUT_S, host_pid_below, ns_pids


class Zygote:
    """This process's template worker for one kind of worker: see grader.sandbox.zygote.

    Started on first use and kept for the life of the process, so a batch's pool
    worker imports torch once for all the students it grades, not once per student.
    `namespaced`: inside bubblewrap (each worker then nests namespaces of its own), as
    `slot`'s uid when the grader is root; its workdirs must be made under `slot_root`."""

    _running: dict[tuple[bool, bool], Zygote] = {}

    def __init__(self, use_gpu: bool, namespaced: bool = False,
                 uid_range: tuple[int, int] | None = uids.DEFAULT_UID_RANGE):
        self.use_gpu = use_gpu
        self.namespaced = namespaced
        self.slot: uids.UidSlot | None = None
        self.slot_root: Path | None = None
        self.runtime = isolation.build_runtime(scratch.make("runtime"))
        self.runtime.chmod(0o755)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        runtime = isolation.RUNTIME_MOUNT if namespaced else str(self.runtime)
        bootstrap = (f"import sys; sys.path.insert(0, {runtime!r}); "
                     f"from grader.sandbox.zygote import main; main({theirs.fileno()})")
        command = [sys.executable, "-I", "-c", bootstrap]
        user: dict = {}
        home = str(self.runtime)
        if namespaced:
            if uid_range is not None and os.geteuid() == 0:
                try:
                    self.slot = uids.claim(uid_range)
                except (OSError, RuntimeError):
                    self.slot = None
            self.slot_root = scratch.make("slot")
            self.slot_root.chmod(0o711)  # the slot's uid may pass through to its workdirs, not list them
            tmp_size = SandboxLimits().write_budget_mb << 20  # the template's own /tmp: each worker gets a fresh one
            command = isolation.template_bwrap_command(str(self.slot_root), str(self.runtime), use_gpu,
                                                       tmp_size) + command
            home = "/tmp"
            if self.slot is not None:  # bubblewrap itself runs as the slot's uid
                user = {"user": self.slot.uid, "group": self.slot.gid, "extra_groups": []}
        env = isolation.scrubbed_env(use_gpu, home, home)
        self.log = self.runtime.parent / f"{self.runtime.name}.log"  # outside what workers may read
        with open(os.open(self.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab") as log:
            self.proc = subprocess.Popen(command, cwd=self.runtime, env=env,
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                         pass_fds=(theirs.fileno(),), start_new_session=True, **user)
        theirs.close()
        self.channel = ours
        self.replies = ours.makefile("rb")

    @property
    def uid(self) -> int | None:
        """The uid its workers run as (namespaced, as root), else None."""
        return self.slot.uid if self.slot is not None else None

    @classmethod
    def kind_for(cls, use_gpu: bool, uid_range: tuple[int, int] | None,
                 switches: isolation.SandboxSwitches) -> str | None:
        """Which template this host's workers fork from: "namespaced" (under bubblewrap: a CPU worker, where
        namespaces nest; grader.sandbox.client decides the same way), "plain" (the no-namespace level), or
        None (every worker is started from scratch)."""
        if switches.no_template:
            return None
        root = os.geteuid() == 0
        probe_uid = uid_range[0] if uid_range is not None and root else None
        host = isolation.host_layers(probe_uid, switches)
        if not host.bubblewrap:
            return "plain"
        return "namespaced" if not use_gpu and not host.nested and not (root and host.uid) else None

    @classmethod
    def warm(cls, uid_range: tuple[int, int] | None, switches: isolation.SandboxSwitches) -> None:
        """Start the template that this process's next worker would fork from, if any, so that it imports
        torch while this process does other work. Torch is imported here to ask for a GPU only where
        there may be one."""
        if switches.no_template:
            return
        if isolation.no_gpu_here():
            use_gpu = False
        else:
            import torch

            use_gpu = torch.cuda.is_available()
        kind = cls.kind_for(use_gpu, uid_range, switches)
        if kind is not None:
            cls.shared(use_gpu, namespaced=kind == "namespaced", uid_range=uid_range)

    @classmethod
    def shared(cls, use_gpu: bool, namespaced: bool = False,
               uid_range: tuple[int, int] | None = uids.DEFAULT_UID_RANGE) -> Zygote:
        key = (use_gpu, namespaced)
        zygote = cls._running.get(key)
        if zygote is None or zygote.proc.poll() is not None:
            if zygote is not None:
                zygote.close()
            zygote = cls._running[key] = cls(use_gpu, namespaced, uid_range)
            _close_at_exit()
        return zygote

    def spawn(self, message: dict, fds: list[int], deadline: float) -> int | None:
        """Fork a supervisor for one worker; its pid, or None if the template did not answer in time."""
        try:
            socket.send_fds(self.channel, [json.dumps(message).encode()], fds)
            self.channel.settimeout(max(0.001, deadline - time.monotonic()))
            line = self.replies.readline()
        except OSError:
            return None
        finally:
            self.channel.settimeout(None)
        try:
            pid = int(line)
        except ValueError:
            return None
        return pid if pid > 0 else None

    def host_pid(self, spawned: int) -> int | None:
        """The host's pid of a process this template forked, from the pid it has in the template's
        PID namespace (namespaced only; else the two are the same)."""
        if not self.namespaced:
            return spawned
        return host_pid_below(self.proc.pid, spawned, level=1)

    def own_pids(self) -> set[int]:
        """The host's pids of the template's own processes: under bubblewrap, bubblewrap, its init
        (pid 1 of the slot's PID namespace) and the template (pid 2); never what it forked for a worker."""
        own = {self.proc.pid}
        if self.namespaced:
            own |= {pid for pid in descendants(self.proc.pid) if ns_pids(pid)[1:] in (["1"], ["2"])}
        return own

    def close(self) -> None:
        self.replies.close()  # the file holds the socket open too: close both, so the template sees EOF
        self.channel.close()
        try:
            self.proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.runtime, ignore_errors=True)
        self.log.unlink(missing_ok=True)
        if self.slot_root is not None:
            shutil.rmtree(self.slot_root, ignore_errors=True)
        if self.slot is not None:
            uids.sweep(self.slot.uid)
            self.slot.release()
            self.slot = None

    @classmethod
    def close_all(cls) -> None:
        """Close this process's templates, then remove every sandbox folder this process made and has not
        removed (a template it was still making when it was stopped, a worker's it was running). Called
        only as the process ends, or as a Ray actor is about to be ended."""
        for zygote in cls._running.values():
            zygote.close()
        cls._running.clear()
        scratch.remove_left_by(os.getpid())


_exit_hook_pid: int | None = None  # the process whose multiprocessing exit hook closes its templates


def _close_at_exit() -> None:
    """Close this process's templates however it exits normally: atexit for a command, and
    multiprocessing's own exit hook for a pool worker (which ends with os._exit, skipping atexit), so
    that no template's runtime folder, slot folder or uid outlives the process that started it. (A
    worker stopped by a signal closes them itself: grader.pipeline.local_pool.)"""
    global _exit_hook_pid
    if _exit_hook_pid != os.getpid():
        multiprocessing.util.Finalize(None, Zygote.close_all, exitpriority=10)
        _exit_hook_pid = os.getpid()


atexit.register(Zygote.close_all)
