"""The trusted side's handle on a template worker (grader.sandbox.zygote is the template itself).

One template per kind of worker (CPU or GPU) is started on first use and kept for the
life of the process; `Zygote.spawn` asks it to fork the supervisor of one new worker.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from grader.sandbox import isolation
from grader.sandbox.worker_status import STOP_TIMEOUT_S


class Zygote:
    """This process's template worker for one kind of worker (CPU or GPU): see grader.sandbox.zygote.

    Started on first use and kept for the life of the process, so a batch's pool
    worker imports torch once for all the students it grades, not once per student."""

    _running: dict[bool, Zygote] = {}

    def __init__(self, use_gpu: bool):
        self.use_gpu = use_gpu
        self.runtime = isolation.build_runtime(Path(tempfile.mkdtemp(prefix="grade-runtime-")))
        self.runtime.chmod(0o755)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        bootstrap = (f"import sys; sys.path.insert(0, {str(self.runtime)!r}); "
                     f"from grader.sandbox.zygote import main; main({theirs.fileno()})")
        env = isolation.scrubbed_env(use_gpu, str(self.runtime), str(self.runtime))
        self.log = self.runtime.parent / f"{self.runtime.name}.log"  # outside what workers may read
        with open(os.open(self.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-I", "-c", bootstrap], cwd=self.runtime, env=env,
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                         pass_fds=(theirs.fileno(),), start_new_session=True)
        theirs.close()
        self.channel = ours
        self.replies = ours.makefile("rb")

    @classmethod
    def shared(cls, use_gpu: bool) -> Zygote:
        zygote = cls._running.get(use_gpu)
        if zygote is None or zygote.proc.poll() is not None:
            zygote = cls._running[use_gpu] = cls(use_gpu)
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

    def close(self) -> None:
        self.replies.close()  # the file holds the socket open too: close both, so the template sees EOF
        self.channel.close()
        try:
            self.proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.runtime, ignore_errors=True)
        self.log.unlink(missing_ok=True)

    @classmethod
    def close_all(cls) -> None:
        for zygote in cls._running.values():
            zygote.close()
        cls._running.clear()


atexit.register(Zygote.close_all)
