"""The trusted side of the sandbox: start, call, time out, restart.

`Sandbox.call()` never raises for anything the student's code does; it
returns a `CallResult` whose `status` says what happened. `StudentModule`
turns those results into exceptions a test can let fly (see grader.testing).
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from grader.sandbox import isolation, protocol
from grader.sandbox.facts import CallFacts

STARTUP_TIMEOUT_S = 120.0


@dataclass
class CallResult:
    """What happened when the student's function was called once."""

    status: str  # ok | raised | missing | import_failed | timeout | crashed | unsupported | budget
    value: object = None
    error: dict = field(default_factory=dict)
    detail: str = ""
    facts: CallFacts = field(default_factory=CallFacts)
    output: str = ""  # what the student's code printed during this call (capped)


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(code).name
    except ValueError:
        return f"signal {code}"


class Sandbox:
    """One student's worker process, restarted after every timeout or crash."""

    def __init__(self, files: dict[str, bytes], modules: list[str], *, call_timeout_s: float = 30.0,
                 budget_s: float = 600.0, memory_mb: int = 8192, cpu_time_s: int = 900,
                 file_size_mb: int = 64, output_cap_kb: int = 64, max_processes: int = 256,
                 use_gpu: bool | None = None,
                 isolation_level: str | None = None):
        self.files = files
        self.modules = modules
        self.call_timeout_s = call_timeout_s
        self.budget_s = budget_s
        self.memory_mb = memory_mb
        self.cpu_time_s = cpu_time_s
        self.file_size_mb = file_size_mb
        self.max_processes = max_processes
        self.output_cap = output_cap_kb * 1024
        self.use_gpu = torch.cuda.is_available() if use_gpu is None else use_gpu
        if isolation_level is None:
            isolation_level = "bubblewrap" if isolation.bwrap_works() else "process"
        self.isolation = isolation.describe(isolation_level)
        self.spent_s = 0.0
        self.restarts = 0
        self._proc: subprocess.Popen | None = None
        self._root = tempfile.mkdtemp(prefix="grade-sandbox-")
        self._output_path = os.path.join(self._root, "student-output.log")
        self._output_read = 0
        self.output_log: list[str] = []

    # ----------------------------------------------------------------- lifecycle
    def _fresh_workdir(self) -> str:
        workdir = os.path.join(self._root, f"work{self.restarts}")
        os.makedirs(workdir)
        for name, data in self.files.items():
            target = Path(workdir, name)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        os.makedirs(os.path.join(workdir, ".home"), exist_ok=True)
        return workdir

    def start(self) -> None:
        """Start a worker (the caller may do other work until the first call)."""
        if self._proc is not None:
            return
        workdir = self._fresh_workdir()
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        bwrap = self.isolation.level == "bubblewrap"
        runtime = isolation.RUNTIME_MOUNT if bwrap else str(isolation.GRADER_PACKAGE.parent)
        home = f"{isolation.WORKDIR_MOUNT}/.home" if bwrap else os.path.join(workdir, ".home")
        bootstrap = (f"import sys; sys.path.insert(0, {runtime!r}); "
                     f"from grader.sandbox.worker import main; "
                     f"main({req_r}, {rep_w}, {list(self.modules)!r})")
        command = [sys.executable, "-I", "-c", bootstrap]
        if bwrap:
            command = isolation.bwrap_command(workdir, self.use_gpu) + command
        output = open(self._output_path, "ab")
        self._output_read = output.tell()
        try:
            self._proc = subprocess.Popen(
                command, cwd=workdir, env=isolation.scrubbed_env(self.use_gpu, home),
                stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
                pass_fds=(req_r, rep_w), start_new_session=True, close_fds=True,
                preexec_fn=lambda: isolation.limit_resources(
                    self.memory_mb, self.cpu_time_s, self.file_size_mb, self.use_gpu,
                    self.max_processes),
            )
        finally:
            output.close()
            os.close(req_r)
            os.close(rep_w)
        self._req_w, self._rep_r = req_w, rep_r
        self._awaiting_hello = True

    def _read_reply(self, timeout: float) -> tuple[str, object]:
        """('ok', message) | ('timeout', None) | ('closed', None) | ('garbled', text)."""
        ready, _, _ = select.select([self._rep_r], [], [], max(0.0, timeout))
        if not ready:
            return "timeout", None
        try:
            return "ok", protocol.read_message(self._rep_r)
        except protocol.ChannelClosed:
            return "closed", None
        except protocol.ProtocolError as exc:
            return "garbled", str(exc)

    def _ensure_ready(self) -> CallResult | None:
        self.start()
        if not self._awaiting_hello:
            return None
        started = time.monotonic()
        state, message = self._read_reply(STARTUP_TIMEOUT_S)
        self.spent_s += time.monotonic() - started
        self._awaiting_hello = False
        if state == "ok" and isinstance(message, dict) and "hello" in message:
            return None  # import errors come back with the calls that need the module
        detail = self._death_detail(state, STARTUP_TIMEOUT_S)
        self.kill()
        return CallResult(status="crashed", detail=f"while importing your files: {detail}",
                          output=self._new_output())

    def _death_detail(self, state: str, timeout: float) -> str:
        if state == "timeout":
            return f"did not answer within {timeout:g} s"
        if state == "garbled":
            return "the worker's channel was corrupted"
        code = self._proc.wait(timeout=10) if self._proc else None
        if code is None:
            return "the worker stopped answering"
        if code > 128 and self.isolation.level == "bubblewrap":
            code = -(code - 128)  # bwrap's init reports a signal death as 128 + signal
        if code < 0:
            name = _signal_name(-code)
            if name == "SIGXCPU":
                return "used up its CPU-time limit (SIGXCPU)"
            if name == "SIGKILL":
                return "was killed (SIGKILL): most likely the memory limit"
            if name == "SIGSEGV":
                return "crashed with a segmentation fault (SIGSEGV)"
            return f"was killed by {name}"
        return f"exited with code {code} (os._exit or a hard exit in your code)"

    def kill(self) -> None:
        """Kill the worker's whole process group; the next call starts a fresh one."""
        if self._proc is None:
            return
        try:
            os.killpg(self._proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for fd in (self._req_w, self._rep_r):
            try:
                os.close(fd)
            except OSError:
                pass
        self._proc = None
        self.restarts += 1

    def close(self) -> None:
        self.kill()
        shutil.rmtree(self._root, ignore_errors=True)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ output
    def _new_output(self) -> str:
        try:
            with open(self._output_path, "rb") as fh:
                fh.seek(self._output_read)
                data = fh.read(self.output_cap + 1)
                self._output_read = fh.seek(0, os.SEEK_END)
        except OSError:
            return ""
        text = data[: self.output_cap].decode("utf-8", errors="replace")
        if len(data) > self.output_cap:
            text += f"\n[... output cut at {self.output_cap // 1024} KiB ...]"
        if text:
            self.output_log.append(text)
        return text

    # -------------------------------------------------------------------- calls
    @property
    def budget_left_s(self) -> float:
        return self.budget_s - self.spent_s

    def request(self, message: dict, timeout_s: float | None = None) -> CallResult:
        """Send one request; always returns a CallResult, never raises for student faults."""
        if self.budget_left_s <= 0:
            return CallResult(status="budget",
                              detail=f"the submission's time budget of {self.budget_s:g} s is used up")
        failed = self._ensure_ready()
        if failed is not None:
            return failed
        timeout = min(timeout_s or self.call_timeout_s, self.budget_left_s)
        started = time.monotonic()
        try:
            protocol.write_message(self._req_w, message)
            state, reply = self._read_reply(timeout)
        except (BrokenPipeError, OSError):
            state, reply = "closed", None
        self.spent_s += time.monotonic() - started
        if state != "ok":
            detail = self._death_detail(state, timeout)
            status = "timeout" if state == "timeout" else "crashed"
            self.kill()
            return CallResult(status=status, detail=detail, output=self._new_output())
        output = self._new_output()
        facts = CallFacts.from_message(reply.get("facts"))
        if reply.get("ok"):
            return CallResult(status="ok", value=reply.get("value"), facts=facts, output=output)
        if reply.get("missing"):
            name = message.get("name", "")
            errors = reply.get("import_errors") or {}
            if errors:
                return CallResult(status="import_failed", error=next(iter(errors.values())),
                                  detail=", ".join(sorted(errors)), output=output)
            return CallResult(status="missing", detail=name, output=output)
        if "unsupported" in reply:
            return CallResult(status="unsupported", detail=reply["unsupported"], facts=facts,
                              output=output)
        return CallResult(status="raised", error=reply.get("error", {}), facts=facts, output=output)

    def call(self, name: str, args: tuple = (), kwargs: dict | None = None, *,
             forbidden: tuple[str, ...] = (), track_tensors: bool = False,
             timeout_s: float | None = None, device: str = "cpu") -> CallResult:
        return self.request({"op": "call", "name": name, "args": list(args),
                             "kwargs": dict(kwargs or {}), "forbidden": list(forbidden),
                             "track_tensors": track_tensors, "device": device}, timeout_s)

    def time(self, name: str, input_sets: list, options: dict,
             timeout_s: float | None = None) -> CallResult:
        return self.request({"op": "time", "name": name, "input_sets": input_sets,
                             "options": options}, timeout_s)
