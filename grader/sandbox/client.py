"""The trusted side of the sandbox: start, call, time out, restart.

`Sandbox.call()` never raises for anything the student's code does; it
returns a `CallResult` whose `status` says what happened; grader.harness.testing
turns those results into failures a test can let fly.

A worker is started as: this process → supervisor (trusted, a subreaper;
grader.sandbox.supervisor) → worker (forked, fenced in by
grader.sandbox.layers before any student file is imported), inside
bubblewrap where it works. Every wait on the worker, start-up included, has
a deadline inside the submission's budget, which is wall-clock time from the
Sandbox's creation: one submission never costs more than its budget, and a
worker that stops half-way through a reply cannot hold the grader.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch

from grader.sandbox import isolation, namespaces, protocol, scratch, uids
from grader.sandbox.facts import CallFacts
from grader.sandbox.isolation import Isolation
from grader.sandbox.layers import WorkerSpec
from grader.sandbox.limits import SandboxLimits
from grader.sandbox.supervisor import descendants
from grader.sandbox.template import Zygote
from grader.sandbox.worker_status import (
    STOP_TIMEOUT_S,
    describe_status,
    drain_status,
    host_pid,
    host_pid_below,
    status_bytes,
    wait_gone,
)

STARTUP_TIMEOUT_S = 120.0  # torch's import in a fresh worker, on a loaded machine


class SandboxUnavailable(RuntimeError):
    """No worker could be started: a host problem, since no student code has run yet."""


@dataclass
class CallResult:
    """What happened when the student's function was called once."""

    status: str  # ok | raised | missing | import_failed | timeout | crashed | unsupported | budget | disk
    value: object = None
    error: dict = field(default_factory=dict)
    detail: str = ""
    facts: CallFacts = field(default_factory=CallFacts)
    output: str = ""  # what the student's code printed during this call (capped)





class Sandbox:
    """One student's worker process, restarted after every timeout or crash."""

    def __init__(self, files: dict[str, bytes], modules: list[str], *,
                 limits: SandboxLimits | None = None, use_gpu: bool | None = None,
                 isolation_level: str | None = None,
                 uid_range: tuple[int, int] | None = uids.DEFAULT_UID_RANGE,
                 protected: tuple[str, ...] = (), deadline: float | None = None,
                 switches: isolation.SandboxSwitches | None = None):
        """`deadline` (time.monotonic) shares another sandbox's budget: a submission graded in two
        workers (its own code, and its kernels alone) costs one budget. `switches`: the layers the
        staff turned off (default: as this process's environment says)."""
        self.files = files
        self.modules = modules
        self.limits = limits = SandboxLimits() if limits is None else limits
        self.call_timeout_s = limits.call_timeout_s
        self.budget_s = limits.submission_budget_s
        self.deadline = time.monotonic() + self.budget_s if deadline is None else deadline
        self.output_cap = limits.output_cap_kb * 1024
        self.max_reply_bytes = limits.max_reply_mb << 20
        self.protected = tuple(str(p) for p in protected)
        self.use_gpu = torch.cuda.is_available() if use_gpu is None else use_gpu
        self.restarts = 0
        self._slot: uids.UidSlot | None = None
        if uid_range is not None and os.geteuid() == 0:
            try:
                self._slot = uids.claim(uid_range)
            except (OSError, RuntimeError):
                self._slot = None
        self.switches = isolation.SandboxSwitches.from_environment() if switches is None else switches
        self.host = isolation.host_layers(self._slot.uid if self._slot else None, self.switches)
        if self.host.uid and self._slot is not None:  # that uid cannot run Python here: do not use it
            self._slot.release()
            self._slot = None
        if isolation_level is None:
            isolation_level = "bubblewrap" if self.host.bubblewrap else "process"
        self.base = isolation_level
        predicted = self.host.predicted()
        missing = dict(predicted.missing)
        if isolation_level == "process" and self.host.bubblewrap:
            missing["bubblewrap"] = "not used for this worker"
        layers = (set(predicted.layers) - {"bubblewrap", "process"}) | {isolation_level}
        self.isolation = Isolation(isolation.ordered(layers), {}, missing, predicted.fixes)
        # Under bubblewrap a CPU worker forks from its slot's template inside bubblewrap and nests
        # namespaces of its own (grader.sandbox.namespaces); it runs as the template's uid. A GPU
        # worker, or a host that refuses nested namespaces, execs bubblewrap for each worker.
        self._nested: Zygote | None = None
        if (self.base == "bubblewrap" and not self.use_gpu and not self.host.nested
                and not (os.geteuid() == 0 and self.host.uid)):
            zygote = Zygote.shared(False, namespaced=True, uid_range=uid_range)
            if zygote.uid is not None or self._slot is None:  # the same uid rule as an exec'd worker's
                self._nested = zygote
                if self._slot is not None:
                    self._slot.release()
                    self._slot = None
        self._proc: subprocess.Popen | None = None  # an exec'd supervisor (bubblewrap, or no template)
        self._supervisor_pid: int | None = None  # a supervisor forked by the template worker (host pid)
        self._running = False
        self._ready = False
        self._awaiting_hello = False
        self._worker_pid: int | None = None
        slots = str(self._nested.slot_root) if self._nested is not None else None
        self._root = str(scratch.make("sandbox", slots))
        os.chmod(self._root, 0o711)  # the worker's uid may pass through, not list
        self._runtime: Path | None = None
        self._output_path = os.path.join(self._root, "student-output.log")
        self._output_read = 0
        self.output_log: list[str] = []
        self._workdir: str | None = None
        self._held: int | None = None  # bytes in the folder of the worker that last ended at its write budget

    # ----------------------------------------------------------------- lifecycle
    def _fresh_workdir(self) -> str:
        workdir = os.path.join(self._root, f"work{self.restarts}")
        os.makedirs(workdir)
        for name, data in self.files.items():
            target = Path(workdir, name)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        for private in (".home", ".tmp"):
            os.makedirs(os.path.join(workdir, private), exist_ok=True)
        uid = self.worker_uid
        if uid is not None:  # the worker owns its own folder, and nothing else
            for folder, dirs, names in os.walk(workdir):
                for path in [folder, *(os.path.join(folder, n) for n in dirs + names)]:
                    os.lchown(path, uid, uid)
        self._workdir = workdir
        return workdir

    @property
    def worker_uid(self) -> int | None:
        """The uid the worker runs as (its own, or its template's under bubblewrap); None: this user's."""
        if self._nested is not None:
            return self._nested.uid
        return self._slot.uid if self._slot is not None else None

    def _spec(self, workdir: str, runtime: str, fds: dict[str, int]) -> WorkerSpec:
        bwrap = self.base == "bubblewrap"
        return WorkerSpec(
            workdir=isolation.WORKDIR_MOUNT if bwrap else workdir, modules=list(self.modules), **fds,
            memory_mb=self.limits.memory_mb, cpu_time_s=self.limits.cpu_time_s,
            file_size_mb=self.limits.file_size_mb, max_processes=self.limits.max_processes,
            write_budget_mb=self.limits.write_budget_mb,
            use_gpu=self.use_gpu,
            uid=None if (bwrap or self._slot is None) else self._slot.uid,
            landlock=self.host.landlock_abi >= 1, seccomp=not self.host.seccomp,
            read_paths=isolation.python_roots() + isolation.library_paths(self.use_gpu) + [runtime],
            devices=isolation.worker_gpu_devices() if self.use_gpu else [],
            protected=list(self.protected))

    @property
    def uses_zygote(self) -> bool:
        """Whether the worker forks from a template worker: at the no-namespace level (unless the staff
        switched it off), and under bubblewrap where namespaces nest (see __init__)."""
        return self._nested is not None or (self.base == "process" and not self.switches.no_template)

    def start(self) -> None:
        """Start a worker (the caller may do other work until the first call)."""
        if self._running:
            return
        workdir = self._fresh_workdir()
        zygote = self._nested or (Zygote.shared(self.use_gpu) if self.uses_zygote else None)
        if zygote is not None:
            self._runtime = zygote.runtime
        elif self._runtime is None:
            self._runtime = isolation.build_runtime(Path(self._root) / "runtime")
        bwrap = self.base == "bubblewrap"
        runtime = isolation.RUNTIME_MOUNT if bwrap else str(self._runtime)
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        life_r, life_w = os.pipe()
        stat_r, stat_w = os.pipe()
        spec = self._spec(workdir, runtime, {"request_fd": req_r, "reply_fd": rep_w, "lifeline_fd": life_r,
                                             "status_fd": stat_w})
        if zygote is not None:
            self._start_from(zygote, spec, workdir, (req_r, rep_w, life_r, stat_w))
            os.set_blocking(req_w, False)
            self._req_w, self._rep_r, self._life_w, self._stat_r = req_w, rep_r, life_w, stat_r
            self._ready = False
            self._awaiting_hello = True
            return
        bootstrap = (f"import sys; sys.path.insert(0, {runtime!r}); "
                     f"from grader.sandbox.supervisor import main; main({spec.to_json()!r})")
        command = [sys.executable, "-I", "-c", bootstrap]
        user: dict = {}
        copies: list[int] = []  # under bubblewrap: the folder's files, which it copies into the worker's tmpfs
        if bwrap:
            prefix, copies = isolation.bwrap_command(workdir, str(self._runtime), self.use_gpu,
                                                     self.limits.write_budget_mb << 20)
            command = prefix + command
            if self._slot is not None:  # bubblewrap itself runs as the worker's uid
                user = {"user": self._slot.uid, "group": self._slot.gid, "extra_groups": []}
        env = isolation.scrubbed_env(self.use_gpu, os.path.join(spec.workdir, ".home"),
                                     os.path.join(spec.workdir, ".tmp"))
        output = open(self._output_path, "ab")
        os.chmod(self._output_path, 0o600)
        self._output_read = output.tell()
        try:
            self._proc = subprocess.Popen(
                command, cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
                pass_fds=(req_r, rep_w, life_r, stat_w, *copies), start_new_session=True, close_fds=True, **user)
        finally:
            output.close()
            for fd in (req_r, rep_w, life_r, stat_w, *copies):
                os.close(fd)
        os.set_blocking(req_w, False)  # a worker that stops reading costs a deadline, not a hang
        self._req_w, self._rep_r, self._life_w, self._stat_r = req_w, rep_r, life_w, stat_r
        self._running = True
        self._ready = False
        self._awaiting_hello = True

    def _start_from(self, zygote: Zygote, spec: WorkerSpec, workdir: str, fds: tuple[int, int, int, int]) -> None:
        """Have the template fork this worker's supervisor (it receives the pipes and the output file)."""
        env = isolation.scrubbed_env(self.use_gpu, os.path.join(spec.workdir, ".home"),
                                     os.path.join(spec.workdir, ".tmp"))
        message: dict = {"spec": json.loads(spec.to_json()), "env": env}
        if zygote.namespaced:  # its own folder, as the template sees the slot's folder of workdirs
            message["nest"] = {"source": os.path.join(namespaces.SLOT_MOUNT,
                                                      os.path.relpath(workdir, zygote.slot_root))}
        output = os.open(self._output_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self._output_read = os.lseek(output, 0, os.SEEK_END)
        try:
            pid = zygote.spawn(message, [*fds, output], min(self.deadline, time.monotonic() + STARTUP_TIMEOUT_S))
        finally:
            for fd in (*fds, output):
                os.close(fd)
        self._supervisor_pid = zygote.host_pid(pid) if pid is not None else None
        self._running = True  # a template that failed shows as a worker that never reports

    def _confirm(self, message: dict) -> None:
        """The isolation of the worker that just reported: its own report, checked from outside."""
        report = message.get("ready") or {}
        details = {k: str(v) for k, v in (report.get("applied") or {}).items()}
        missing = {k: v for k, v in self.isolation.missing.items() if k in ("bubblewrap", "uid")}
        missing.update({k: str(v) for k, v in (report.get("missing") or {}).items()})
        layers = {self.base, "reaper", *details}
        if self._nested is not None:
            details[self.base] = ("own user, PID, network, IPC and mount namespaces, nested in its slot's "
                                  "bubblewrap sandbox (forked from the slot's template worker)")
        else:
            details[self.base] = ("own user, PID, network, IPC and mount namespaces" if self.base == "bubblewrap"
                                  else "own session, scrubbed environment, resource limits")
        details["reaper"] = "subreaper supervisor" + (" and PID namespace" if self.base == "bubblewrap" else "")
        uid = self.worker_uid
        if self.base == "bubblewrap" and uid is not None:
            layers.add("uid")
            details["uid"] = f"bubblewrap runs as uid {uid}, no supplementary groups"
        # Evidence before belief: what /proc shows from outside. At the no-namespace level a layer
        # nothing confirms is dropped; under bubblewrap, one that /proc contradicts.
        seen = isolation.observed(self._worker_pid) if self._worker_pid else {}
        checks = {"uid": seen.get("Uid") == str(uid if uid is not None else -1),
                  "landlock": seen.get("NoNewPrivs") == "1", "seccomp": seen.get("Seccomp") == "2"}
        for layer, holds in checks.items():
            if layer in layers and not holds and (self.base == "process" or seen):
                layers.discard(layer)
                missing[layer] = "reported by the worker but not visible in /proc"
        fixes = {k: v for k, v in self.isolation.fixes.items() if k not in layers}
        self.isolation = Isolation(isolation.ordered(layers), details, missing, fixes)

    def _host_pid(self, reported: int) -> int | None:
        """The worker's pid as this process sees it, from the pid it reported (its own namespace's)."""
        if self._nested is not None:
            return host_pid_below(self._supervisor_pid, reported, level=2) if self._supervisor_pid else None
        return host_pid(reported, self.worker_uid, self.base == "bubblewrap")

    def _read(self, deadline: float) -> tuple[str, object]:
        """('ok', message) | ('timeout', None) | ('closed', None) | ('garbled', text)."""
        try:
            return "ok", protocol.read_message(self._rep_r, deadline, self.max_reply_bytes)
        except protocol.DeadlinePassed:
            return "timeout", None
        except protocol.ChannelClosed:
            return "closed", None
        except protocol.ProtocolError as exc:
            return "garbled", str(exc)

    def wait_ready(self) -> Isolation:
        """Start the worker if needed and wait until its fences are up; the confirmed isolation.

        Raises SandboxUnavailable when no worker comes up."""
        self.start()
        if self._ready:
            return self.isolation
        timeout = max(0.0, min(STARTUP_TIMEOUT_S, self.budget_left_s))  # what is left of the budget, at most
        state, message = self._read(time.monotonic() + timeout)
        if state != "ok" or not isinstance(message, dict) or "ready" not in message:
            detail = self._death_detail(state, timeout, student_code_ran=False)
            self.kill()
            output = self._new_output().strip()
            raise SandboxUnavailable(f"the sandbox worker did not start: it {detail}"
                                     + (f" ({output[-300:]})" if output else ""))
        self._worker_pid = self._host_pid(int(message.get("pid", -1)))
        self._confirm(message)
        self._ready = True
        return self.isolation

    def _ensure_ready(self) -> CallResult | None:
        try:
            self.wait_ready()
        except SandboxUnavailable as exc:
            if self.budget_left_s <= 0:  # the budget ran out while a fresh worker started
                return CallResult(status="budget",
                                  detail=f"the submission's time budget of {self.budget_s:g} s is used up")
            return CallResult(status="crashed", detail=str(exc))
        if not self._awaiting_hello:
            return None
        self._awaiting_hello = False
        timeout = max(0.0, min(self.call_timeout_s, self.budget_left_s))
        state, message = self._read(time.monotonic() + timeout)
        if state == "ok" and isinstance(message, dict) and "hello" in message:
            return None  # import errors come back with the calls that need the module
        detail = self._death_detail(state, timeout)
        self.kill()
        return self._at_write_budget(at_import=True) or CallResult(
            status="timeout" if state == "timeout" else "crashed", detail=f"while importing your files: {detail}",
            output=self._new_output())

    def _death_detail(self, state: str, timeout: float, student_code_ran: bool = True) -> str:
        if state == "timeout":
            return f"did not answer within {timeout:g} s"
        if state == "garbled":
            return "broke the grader's channel (its reply was not a valid message)"
        return describe_status(self._stop(), student_code_ran)

    def _stop(self) -> int | None:
        """End the worker and everything it started; the worker's wait status, if known."""
        if not self._running:
            return None
        proc, self._proc = self._proc, None
        supervisor, self._supervisor_pid = self._supervisor_pid, None
        self._running = False
        self._ready = False
        self.restarts += 1
        os.close(self._life_w)  # the supervisor kills the whole tree, reports and exits
        status, ended, held = drain_status(self._stat_r, time.monotonic() + STOP_TIMEOUT_S)
        self._held = held
        if ended and supervisor is not None and self._nested is not None:  # it reported; now it ends too
            ended = wait_gone(supervisor, time.monotonic() + STOP_TIMEOUT_S)
        if not ended:  # the supervisor did not finish: kill it (everything below it goes by uid)
            try:
                if proc is not None:
                    os.killpg(proc.pid, signal.SIGKILL)
                elif supervisor is not None:
                    below = descendants(supervisor) if self._nested is not None else []  # its uid is the template's
                    for pid in [supervisor, *below]:
                        with contextlib.suppress(ProcessLookupError, PermissionError):
                            os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if proc is not None:
            try:
                proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                pass
        if self._slot is not None:
            uids.sweep(self._slot.uid)  # whatever might have left the tree, by uid
            uids.sweep_ipc(self._slot.uid)  # and any IPC object it made where seccomp is missing
        for fd in (self._req_w, self._rep_r, self._stat_r):
            try:
                os.close(fd)
            except OSError:
                pass
        if self._workdir is not None:  # what the worker wrote does not wait for the end of the grading
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None
        return status

    def _at_write_budget(self, at_import: bool = False) -> CallResult | None:
        """The result of a call whose worker ended at its write budget (its supervisor said so), else None;
        `at_import`: while the student's files were imported."""
        held, self._held = self._held, None
        if held is None:
            return None
        budget = self.limits.write_budget_mb
        detail = (f"its folder held {held / (1 << 20):.1f} MiB, and the write budget is {budget} MiB for all "
                  f"the files it writes, its own files included")
        return CallResult(status="disk", output=self._new_output(),
                          error={"held_bytes": held, "budget_bytes": budget << 20, "at_import": at_import},
                          detail=("while importing your files: " if at_import else "") + detail)

    def kill(self) -> None:
        """Kill the worker and all it started; the next call starts a fresh one."""
        self._stop()

    def close(self) -> None:
        self.kill()
        shutil.rmtree(self._root, ignore_errors=True)
        if self._slot is not None:
            self._slot.release()
            self._slot = None

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
    def _reset_peak(self) -> int | None:
        """Reset the worker's peak resident size (clear_refs 5) and return its current one."""
        if self._worker_pid is None:
            return None
        try:
            with open(f"/proc/{self._worker_pid}/clear_refs", "w") as fh:
                fh.write("5")
        except OSError:
            return None
        return status_bytes(self._worker_pid, "VmRSS")

    @property
    def budget_left_s(self) -> float:
        return self.deadline - time.monotonic()

    def request(self, message: dict, timeout_s: float | None = None) -> CallResult:
        """Send one request; always returns a CallResult, never raises for student faults."""
        if self.budget_left_s <= 0:
            return CallResult(status="budget",
                              detail=f"the submission's time budget of {self.budget_s:g} s is used up")
        failed = self._ensure_ready()
        if failed is not None:
            return failed
        timeout = max(0.0, min(timeout_s or self.call_timeout_s, self.budget_left_s))
        deadline = time.monotonic() + timeout
        rss_before = self._reset_peak()
        try:
            protocol.write_message(self._req_w, message, deadline)
            state, reply = self._read(deadline)
        except protocol.DeadlinePassed:
            state, reply = "timeout", None
        except OSError:  # the worker is gone (broken pipe)
            state, reply = "closed", None
        if state == "ok" and not isinstance(reply, dict):
            state = "garbled"
        if state != "ok":
            detail = self._death_detail(state, timeout)
            status = "timeout" if state == "timeout" else "crashed"
            self.kill()
            return self._at_write_budget() or CallResult(status=status, detail=detail, output=self._new_output())
        output = self._new_output()
        try:
            facts = CallFacts.from_message(reply.get("facts"))
        except TypeError:
            facts = CallFacts()
        peak = status_bytes(self._worker_pid, "VmHWM") if self._worker_pid and rss_before is not None else None
        if peak is not None and facts.memory_kind != "cuda":  # the grader's own measurement, not the worker's
            facts.peak_memory_bytes = max(0, peak - rss_before)
            facts.memory_measured_by = "grader"
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
            return CallResult(status="unsupported", detail=str(reply["unsupported"]), facts=facts,
                              output=output)
        error = reply.get("error", {})
        if reply.get("fatal") == "cuda":  # the worker ended after this reply; the next call starts a fresh one
            self.kill()
            message = (error.get("message", "") if isinstance(error, dict) else "")[:300]
            return CallResult(status="crashed", error=error if isinstance(error, dict) else {}, facts=facts,
                              detail=f"the GPU reported an error that ends the process ({message}): a read or "
                                     f"write outside a tensor, usually a load or store without its mask",
                              output=output)
        return CallResult(status="raised", error=error if isinstance(error, dict) else {}, facts=facts,
                          output=output)

    def call(self, name: str, args: tuple = (), kwargs: dict | None = None, *,
             forbidden: tuple[str, ...] = (), track_tensors: bool = False,
             timeout_s: float | None = None, device: str = "cpu") -> CallResult:
        return self.request({"op": "call", "name": name, "args": list(args),
                             "kwargs": dict(kwargs or {}), "forbidden": list(forbidden),
                             "track_tensors": track_tensors, "device": device}, timeout_s)

    def time_block(self, name: str, pool, shapes, kwargs: dict, calls: list, projection_seed: int,
                   timeout_s: float | None = None) -> CallResult:
        """One timed block in the worker (grader.harness.timing decides what it is worth)."""
        return self.request({"op": "time_block", "name": name, "pool": pool.to_message(),
                             "shapes": [list(s) for s in shapes], "kwargs": dict(kwargs), "calls": calls,
                             "projection_seed": projection_seed}, timeout_s)

    def timed_outputs(self, indices: list[int], spans: list | None = None,
                      timeout_s: float | None = None) -> CallResult:
        """Outputs of the last timed block, whole, or where `spans[i]` is a list of [start, length]
        those elements of output `indices[i]`, flattened and concatenated (a large output)."""
        message = {"op": "timed_outputs", "indices": list(indices)}
        if spans is not None:
            message["spans"] = [None if s is None else [[int(a), int(b)] for a, b in s] for s in spans]
        return self.request(message, timeout_s)

    @contextlib.contextmanager
    def frozen(self) -> Iterator[None]:
        """Stop every process of the worker's uid (SIGSTOP) while the reference is timed, so the
        worker cannot load the machine then; nothing is stopped without a uid of its own. A worker
        forked from a template inside bubblewrap shares its template's uid: its own tree is stopped."""
        stopped = self._signal_all(signal.SIGSTOP)
        try:
            yield
        finally:
            if stopped:
                self._signal_all(signal.SIGCONT)

    def _signal_all(self, number: int) -> bool:
        if not self._running:
            return False
        if self._nested is not None:
            if self._supervisor_pid is None:
                return False
            pids = descendants(self._supervisor_pid)
        elif self._slot is not None:
            pids = uids.processes_of(self._slot.uid)
        else:
            return False
        for pid in pids:
            try:
                os.kill(pid, number)
            except (ProcessLookupError, PermissionError):
                pass
        return True
