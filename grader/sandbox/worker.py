"""The sandbox worker: imports the student's modules and serves calls.

Forked by the supervisor (grader.sandbox.supervisor) in a temporary folder
holding only the student's files, after the sandbox layers are up. It answers
requests on a private pipe; stdout and stderr belong to the student and are
captured by the trusted side into a capped file.
"""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import sys
import traceback
from pathlib import Path

import torch

from grader.sandbox import protocol
from grader.sandbox.facts import CallFacts, changed_inputs, install_triton_counter, observe, snapshot_inputs
from grader.sandbox.limits import WORKER_TORCH_THREADS, WRITE_BUDGET_EXIT, folder_bytes

MAX_TRACEBACK_FRAMES = 8
# Errors after which the process's CUDA context is unusable: every later call would fail with them.
STICKY_CUDA = re.compile(r"illegal memory access|misaligned address|unspecified launch failure|device-side assert"
                         r"|illegal instruction|CUDA_ERROR_ILLEGAL_ADDRESS|CUDA_ERROR_LAUNCH_FAILED"
                         r"|CUDA_ERROR_MISALIGNED_ADDRESS|CUDA_ERROR_ASSERT|CUDA_ERROR_ILLEGAL_INSTRUCTION")


def sticky_cuda_error(exc: BaseException) -> bool:
    """Whether `exc` is a CUDA error that poisons the process's context (an out-of-bounds access
    faulted): the worker must end after reporting it, and the next call start in a fresh one."""
    return isinstance(exc, RuntimeError) and bool(STICKY_CUDA.search(str(exc)))


def _student_frames(tb, workdir: str) -> list[str]:
    """Format only frames from the student's own files (never grader internals)."""
    lines = []
    for frame in traceback.extract_tb(tb):
        if frame.filename.startswith(workdir):
            name = os.path.relpath(frame.filename, workdir)
            lines.append(f"{name}, line {frame.lineno}, in {frame.name}: {frame.line or ''}".strip())
    return lines[-MAX_TRACEBACK_FRAMES:]


def _summary(exc: BaseException, workdir: str) -> dict:
    if isinstance(exc, SystemExit):
        message = f"called sys.exit({exc.code!r})"
    else:
        message = str(exc)
    if isinstance(exc, OSError) and exc.errno == 27:
        message = "the output limit was reached: the code printed or wrote too much"
    return {
        "type": type(exc).__name__,
        "message": message[:2000],
        "frames": _student_frames(exc.__traceback__, workdir),
        "not_implemented": isinstance(exc, NotImplementedError),
    }


def _plain(value, path: str = "value"):
    """Check a return value only holds types a weights_only load accepts."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value
    if type(value) is torch.Tensor:
        return value.detach()
    if isinstance(value, torch.Tensor):  # a subclass could carry code: send a plain copy
        return torch.Tensor._make_subclass(torch.Tensor, value.detach(), False).clone()
    if type(value) in (tuple, list):
        return type(value)(_plain(v, f"{path}[{i}]") for i, v in enumerate(value))
    if type(value) is dict and all(isinstance(k, str) for k in value):
        return {k: _plain(v, f"{path}[{k!r}]") for k, v in value.items()}
    if isinstance(value, torch.dtype | torch.device | torch.Size):
        return value
    raise TypeError(f"{path} is a {type(value).__module__}.{type(value).__qualname__}")


class Worker:
    def __init__(self, workdir: str, modules: list[str]):
        self.workdir = workdir
        self.namespaces: dict[str, dict] = {}
        self.import_errors: dict[str, dict] = {}
        self.modules = modules
        self.timed: list = []  # outputs of the last timed block
        self.end_after_reply = False  # a sticky CUDA error: this process's GPU context is lost
        self.pool = None
        self.pool_spec = None

    def import_modules(self) -> dict:
        sys.path.insert(0, self.workdir)
        for filename in self.modules:
            stem = Path(filename).stem
            path = os.path.join(self.workdir, filename)
            if not os.path.isfile(path):
                self.import_errors[stem] = {"type": "FileNotFoundError",
                                            "message": f"{filename} was not submitted",
                                            "frames": [], "not_implemented": False}
                continue
            try:
                spec = importlib.util.spec_from_file_location(stem, path)
                module = importlib.util.module_from_spec(spec)
                sys.modules[stem] = module
                spec.loader.exec_module(module)
                self.namespaces[stem] = vars(module)
            except BaseException as exc:  # SyntaxError, SystemExit, anything at import time
                summary = _summary(exc, self.workdir)
                if isinstance(exc, SyntaxError):
                    summary["message"] = f"{exc.msg} ({filename}, line {exc.lineno})"
                self.import_errors[stem] = summary
        functions = sorted(
            name for ns in self.namespaces.values() for name, v in ns.items() if callable(v)
        )
        return {"import_errors": self.import_errors, "functions": functions}

    def lookup(self, name: str):
        for namespace in self.namespaces.values():
            if name in namespace and callable(namespace[name]):
                return namespace[name]
        return None

    def handle(self, request: dict) -> dict:
        op = request.get("op")
        if op == "ping":
            return {"ok": True, "value": "pong"}
        if op == "call":
            return self.call(request)
        if op == "time_block":
            return self.time_block(request)
        if op == "timed_outputs":
            return self.timed_outputs(request)
        return {"ok": False, "error": {"type": "ProtocolError", "message": f"unknown op {op!r}",
                                       "frames": [], "not_implemented": False}}

    def call(self, request: dict) -> dict:
        name = request["name"]
        function = self.lookup(name)
        if function is None:
            return {"ok": False, "missing": True, "import_errors": self.import_errors}
        facts = CallFacts()
        args, kwargs = tuple(request.get("args", ())), request.get("kwargs", {})
        before = snapshot_inputs(args, kwargs)
        try:
            with observe(tuple(request.get("forbidden", ())), request.get("track_tensors", False),
                         request.get("device", "cpu")) as facts:
                value = function(*args, **kwargs)
        except BaseException as exc:
            return self._failed(exc, {"facts": facts.to_message()})
        facts.mutated_inputs = changed_inputs(before, args, kwargs)
        try:
            value = _plain(value)
        except TypeError as exc:
            return {"ok": False, "unsupported": str(exc), "facts": facts.to_message()}
        return {"ok": True, "value": value, "facts": facts.to_message()}

    def time_block(self, request: dict) -> dict:
        """Run one timed block of the student's function (grader.sandbox.timer.run_block)."""
        from grader.sandbox import timer

        function = self.lookup(request["name"])
        if function is None:
            return {"ok": False, "missing": True, "import_errors": self.import_errors}
        spec = timer.PoolSpec.from_message(request["pool"])
        self.timed = []
        try:
            if self.pool_spec != spec:
                self.pool, self.pool_spec = timer.make_pool(spec), spec
            block = timer.run_block(function, self.pool, request["shapes"], request["calls"],
                                    request.get("kwargs", {}), int(request["projection_seed"]), spec.device)
        except BaseException as exc:
            return self._failed(exc, {})
        self.timed = block.outputs
        return {"ok": True, "value": {"checksums": block.checksums, "event_ms": block.event_ms}}

    def _failed(self, exc: BaseException, extra: dict) -> dict:
        """The reply for a call that raised; a sticky CUDA error also ends this worker after the reply."""
        reply = {"ok": False, "error": _summary(exc, self.workdir), **extra}
        if sticky_cuda_error(exc):
            reply["fatal"] = "cuda"
            self.end_after_reply = True
        return reply

    def timed_outputs(self, request: dict) -> dict:
        """Some outputs of the last timed block, chosen by the trusted side after it ran."""
        outputs = self.timed
        indices = request["indices"]
        spans = request.get("spans") or [None] * len(indices)
        try:
            value = []
            for index, span in zip(indices, spans, strict=True):
                output = outputs[int(index)]
                if isinstance(output, torch.Tensor) and span is not None:  # a large output: its spans only
                    flat = output.detach().reshape(-1)
                    output = torch.cat([flat[int(start):int(start) + int(length)] for start, length in span])
                value.append(_plain(output.cpu() if isinstance(output, torch.Tensor) else output))
        except (IndexError, TypeError, ValueError, RuntimeError) as exc:
            return {"ok": False, "unsupported": str(exc)}
        return {"ok": True, "value": value}


def prepare() -> None:
    """What the worker sets up before its fences go up (torch is imported by then).

    Everything a call may need is imported here: once the fences are up a CPU worker can start
    no thread, so a library that starts one when it is first imported (numpy's BLAS) must be
    loaded before."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an over-long write fails instead of killing us
    torch.set_num_threads(WORKER_TORCH_THREADS)
    try:
        import numpy  # noqa: F401  (Triton's interpreter runs kernels with it)
    except ImportError:
        pass
    install_triton_counter()


def _end_at_budget(workdir: str, budget: int) -> None:
    """Exit (WRITE_BUDGET_EXIT, no reply) when the folder is at its write budget: the supervisor then
    reports the folder's size, whether the student's code stopped at a full disk or not."""
    if folder_bytes(workdir, stop_at=budget) >= budget:
        os._exit(WRITE_BUDGET_EXIT)


_WRITING = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


def watch_writes(workdir: str, budget: int) -> None:
    """Measure the folder whenever Python opens a file to write (an audit hook, which Python code
    cannot remove): at the budget the worker ends before that file is written, so through Python's
    own `open` a worker overshoots by one file at most (RLIMIT_FSIZE). A write that goes around
    Python is bounded by the supervisor's measurement and, under bubblewrap, by the tmpfs's size."""

    def hook(event: str, args: tuple) -> None:
        if event != "open" or len(args) < 3:
            return
        mode, flags = args[1], args[2]
        writing = any(c in mode for c in "wax+") if isinstance(mode, str) else bool((flags or 0) & _WRITING)
        if writing:
            _end_at_budget(workdir, budget)

    sys.addaudithook(hook)


def main(request_fd: int, reply_fd: int, modules: list[str], layers: dict, write_budget: int) -> None:
    """Report the fences, import the student's files, then serve requests until the pipe closes.

    The first message (`ready`) is sent before any student file is imported, so
    what it says about the sandbox layers comes from grader code only. After the import and
    after every request the folder is measured against `write_budget` (bytes)."""
    protocol.write_message(reply_fd, {"ok": True, "ready": layers, "pid": os.getpid()})
    workdir = os.getcwd()
    worker = Worker(workdir, modules)
    watch_writes(workdir, write_budget)
    hello = worker.import_modules()
    _end_at_budget(workdir, write_budget)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except OSError:
            pass
    protocol.write_message(reply_fd, {"ok": True, "hello": hello})
    while True:
        try:
            request = protocol.read_message(request_fd)
        except protocol.ChannelClosed:
            os._exit(0)
        reply = worker.handle(request)
        _end_at_budget(workdir, write_budget)
        for stream in ("stdout", "stderr"):  # before the reply: the trusted side reads the output then
            try:
                getattr(sys, stream).flush()
            except OSError:  # the output cap was reached: drop further output, keep serving
                setattr(sys, stream, open(os.devnull, "w"))
        try:
            protocol.write_message(reply_fd, reply)
        except Exception as exc:  # e.g. a value torch.save cannot write
            protocol.write_message(reply_fd, {"ok": False, "unsupported": f"{exc}"[:500]})
        if worker.end_after_reply:  # a poisoned CUDA context would fail every later call: end here
            os._exit(3)
