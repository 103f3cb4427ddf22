"""Two ways to call a student's function, with one result type.

`SandboxRunner` (grading) sends the call to the sandbox worker.
`InProcessRunner` (plain `pytest` in a workspace, and authoring) imports the
modules here. Both return a `CallResult`, so tests behave the same in both.
"""

from __future__ import annotations

import hashlib
import importlib.util
import itertools
import sys
import traceback
from pathlib import Path
from types import ModuleType

import torch

from grader.core.manifest import KernelContract
from grader.harness.contract import load_launchers
from grader.harness.degenerate import degenerate_answer
from grader.sandbox.client import CallResult, Sandbox
from grader.sandbox.facts import changed_inputs, observe, snapshot_inputs

_counter = itertools.count()


IMPORT_FAILURE = "while importing your files"  # how the sandbox words a crash or hang at import time


def _signature_part(value) -> object:
    if isinstance(value, torch.Tensor):
        return ("tensor", tuple(value.shape), str(value.dtype), tuple(value.stride()), value.device.type)
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, tuple(_signature_part(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((str(k), _signature_part(v)) for k, v in value.items())))
    return ("value", type(value).__name__, repr(value))


def call_signature(args: tuple, kwargs: dict) -> tuple:
    """What decides where a call reads and writes memory: every tensor argument's shape, dtype,
    strides and device, and every other argument's value (a flag, a scale, a length). Tensor
    values are left out: a kernel's addresses and masks depend on these alone, so a call that
    ended the process ends it again on any inputs of the same signature, and a call of another
    signature may well not."""
    return tuple(_signature_part(v) for v in args) + tuple(
        (k, _signature_part(v)) for k, v in sorted(kwargs.items()))


class SandboxRunner:
    """Calls go to the sandbox.

    A function that hung is not run again: its later tests fail at once with the first
    failure's explanation, so one endless loop costs one timeout, not one per test.

    A crash costs only what crashed. The call's signature (`call_signature`: shapes, dtypes,
    strides, flags) is marked as one that ends the process; a later call of the function with
    the same signature fails at once, saying so, without running or restarting anything; a call
    with any other signature runs in a fresh worker (the restart is charged to the submission's
    budget, like every call, and only that budget bounds restarts). So a kernel that dies on some
    shapes keeps every test it passes, whatever order the tests run in: no streak of crashes
    stops a function, and one bad shape costs one restart however many tests try it.
    `crashed_signatures` keeps, per function, the signatures that ended the process.

    A function that filled its folder to the write budget (status `disk`) is not run again either:
    one fill costs one restart, not one per test.

    A crash, hang or full folder while the files are imported happens for every function alike, so
    it ends the run of all of them."""

    def __init__(self, sandbox: Sandbox, kernel_worker: bool = False):
        self.sandbox = sandbox
        # A kernel worker runs no host code of the student's (only vetted device kernels), so the
        # grader's timer there measures each call's own time (grader.harness.timing).
        self.trusted_call_times = kernel_worker
        self.fatal: dict[str, CallResult] = {}
        self.crashed_signatures: dict[str, dict[tuple, CallResult]] = {}  # name → signature → its crash
        self.import_failure: CallResult | None = None

    @property
    def isolation_level(self) -> str:
        return self.sandbox.isolation.level

    def sources(self) -> dict[str, str]:
        """The submitted Python files' text (read by the trusted side; hints only)."""
        return {name: data.decode("utf-8", errors="replace") for name, data in self.sandbox.files.items()
                if name.endswith(".py")}

    def _not_run(self, name: str) -> CallResult | None:
        first = self.import_failure or self.fatal.get(name)
        if first is None:
            return None
        return CallResult(status=first.status, error=dict(first.error),
                          detail=f"{first.detail} (in an earlier test; not run again)")

    def _crashed_before(self, name: str, signature: tuple) -> CallResult | None:
        """A call on inputs of a signature that ended the process before: not run, no restart."""
        first = self.crashed_signatures.get(name, {}).get(signature)
        if first is None:
            return None
        return CallResult(status="crashed_before", error={"crash": first.detail},
                          detail=f"{first.detail} on inputs of these shapes in an earlier test, so it was not "
                                 f"run on them again")

    def call(self, name: str, args: tuple, kwargs: dict, *, forbidden: tuple[str, ...] = (),
             track_tensors: bool = False, device: str = "cpu", fresh: bool = False,
             timeout_s: float | None = None) -> CallResult:
        skipped = self._not_run(name)
        if skipped is not None:
            return skipped
        signature = call_signature(args, kwargs)
        repeated = self._crashed_before(name, signature)
        if repeated is not None:
            return repeated
        if fresh:
            self.sandbox.kill()
        result = self.sandbox.call(name, args, kwargs, forbidden=forbidden,
                                   track_tensors=track_tensors, device=device, timeout_s=timeout_s)
        if result.status in ("timeout", "crashed") and result.detail.startswith(IMPORT_FAILURE):
            self.import_failure = result
        elif result.status == "disk" and result.error.get("at_import"):
            self.import_failure = result
        elif result.status in ("timeout", "disk"):
            self.fatal[name] = result
        elif result.status == "crashed":
            self.crashed_signatures.setdefault(name, {})[signature] = result
        return result

    def time_block(self, name: str, pool, shapes, kwargs: dict, calls: list, projection_seed: int) -> CallResult:
        skipped = self._not_run(name)
        if skipped is not None:
            return skipped
        return self.sandbox.time_block(name, pool, shapes, kwargs, calls, projection_seed)

    def timed_outputs(self, indices: list[int], spans: list | None = None) -> CallResult:
        return self.sandbox.timed_outputs(indices, spans)

    def frozen(self):
        return self.sandbox.frozen()


class InProcessRunner:
    """Imports the workspace's modules into this process (no isolation).

    With a kernel contract (`contract` and the path of the course's launcher module), the
    launchers are imported too, bound to the workspace's own kernel file: plain pytest runs
    the kernel tests as grading does, on the student's whole file."""

    isolation_level = "none (in-process)"

    def __init__(self, workspace: Path, files: tuple[str, ...], contract: KernelContract | None = None,
                 contract_path: Path | None = None):
        self.workspace = Path(workspace)
        self.namespaces: dict[str, dict] = {}
        modules: dict[str, ModuleType] = {}
        self.import_errors: dict[str, dict] = {}
        tag = next(_counter)
        for filename in files:
            path = self.workspace / filename
            stem = Path(filename).stem
            if not path.is_file():
                self.import_errors[stem] = {"type": "FileNotFoundError",
                                            "message": f"{filename} not found in {self.workspace}",
                                            "frames": []}
                continue
            module_name = f"_grade_workspace_{tag}_{stem}"
            spec = importlib.util.spec_from_file_location(module_name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module
            try:
                spec.loader.exec_module(module)
            except Exception as exc:
                self.import_errors[stem] = {"type": type(exc).__name__, "message": str(exc),
                                            "frames": traceback.format_exception(exc)[-3:]}
                continue
            self.namespaces[stem] = vars(module)
            modules[stem] = module
        if contract is not None and contract_path is not None:
            kernels = modules.get(Path(contract.file).stem, ModuleType(Path(contract.file).stem))
            self.namespaces[f"<contract {contract.module}>"] = load_launchers(contract, contract_path, kernels)

    def sources(self) -> dict[str, str]:
        """The workspace's Python files' text (hints only)."""
        return {path.name: path.read_text(encoding="utf-8", errors="replace")
                for path in sorted(self.workspace.glob("*.py")) if path.is_file()}

    def lookup(self, name: str):
        for namespace in self.namespaces.values():
            if callable(namespace.get(name)):
                return namespace[name]
        return None

    def call(self, name: str, args: tuple, kwargs: dict, *, forbidden: tuple[str, ...] = (),
             track_tensors: bool = False, device: str = "cpu", fresh: bool = False,
             timeout_s: float | None = None) -> CallResult:
        function = self.lookup(name)
        if function is None:
            if self.import_errors:
                return CallResult(status="import_failed",
                                  error=next(iter(self.import_errors.values())),
                                  detail=", ".join(self.import_errors))
            return CallResult(status="missing", detail=name)
        before = snapshot_inputs(args, kwargs)
        try:
            with observe(forbidden, track_tensors, device) as facts:
                value = function(*args, **kwargs)
        except Exception as exc:
            frames = [line.strip() for line in traceback.format_tb(exc.__traceback__)[-3:]]
            return CallResult(status="raised", facts=facts,
                              error={"type": type(exc).__name__, "message": str(exc),
                                     "frames": frames,
                                     "not_implemented": isinstance(exc, NotImplementedError)})
        facts.mutated_inputs = changed_inputs(before, args, kwargs)
        return CallResult(status="ok", value=value, facts=facts)

    def time_block(self, name: str, pool, shapes, kwargs: dict, calls: list, projection_seed: int) -> CallResult:
        from grader.sandbox.timer import make_pool, run_block

        function = self.lookup(name)
        if function is None:
            return CallResult(status="missing", detail=name)
        block = run_block(function, make_pool(pool), shapes, calls, kwargs, projection_seed, pool.device)
        self._timed = block.outputs
        return CallResult(status="ok", value={"checksums": block.checksums, "event_ms": block.event_ms})

    def timed_outputs(self, indices: list[int], spans: list | None = None) -> CallResult:
        from grader.harness.timing import take_spans

        spans = spans or [None] * len(indices)
        return CallResult(status="ok", value=[self._timed[i] if span is None else take_spans(self._timed[i], span)
                                              for i, span in zip(indices, spans, strict=True)])


class DegenerateRunner:
    """A stand-in submission for `grade validate`: every call answers what the trusted reference
    answers, with its values made degenerate by one family of grader.harness.degenerate
    (zeros, ones, NaN, an input handed back). Reference answers are cached by their inputs, so
    the families share one computation of each."""

    isolation_level = "none (degenerate answers)"

    def __init__(self, reference: dict, family: str, cache: dict | None = None):
        self.reference = reference
        self.family = family
        self.cache = {} if cache is None else cache

    def sources(self) -> dict[str, str]:
        return {}

    def answer(self, name: str, args: tuple, kwargs: dict) -> tuple[str, object]:
        """("ok", the reference's value) or ("raised", its error), computed once per inputs."""
        key = (name, arguments_key(args), arguments_key(kwargs))
        if key not in self.cache:
            try:
                self.cache[key] = ("ok", self.reference[name](*args, **kwargs))
            except Exception as exc:  # the reference refuses these inputs: so does the placeholder
                self.cache[key] = ("raised", {"type": type(exc).__name__, "message": str(exc), "frames": [],
                                              "not_implemented": False})
        return self.cache[key]

    def cached_reference(self) -> dict:
        """The reference functions, answering from the same cache (for the tests' own comparisons)."""
        def answering(name: str):
            def function(*args, **kwargs):
                state, value = self.answer(name, args, kwargs)
                if state == "raised":
                    raise RuntimeError(value["message"])
                return value
            return function
        return {name: answering(name) for name in self.reference}

    def call(self, name: str, args: tuple, kwargs: dict, **_options) -> CallResult:
        if name not in self.reference:
            return CallResult(status="missing", detail=name)
        state, answer = self.answer(name, args, kwargs)
        if state == "raised":
            return CallResult(status="raised", error=answer)
        return CallResult(status="ok", value=degenerate_answer(self.family, answer, args, kwargs))


def arguments_key(value) -> object:
    """A hashable stand-in for call arguments: shapes, dtypes, strides and the bytes of tensors."""
    if isinstance(value, torch.Tensor):
        data = value.detach().cpu().contiguous()
        return ("tensor", tuple(value.shape), str(value.dtype), value.stride(),
                hashlib.sha1(data.view(torch.uint8).numpy().tobytes() if data.numel() else b"").hexdigest())
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, tuple(arguments_key(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((str(k), arguments_key(v)) for k, v in value.items())))
    return ("value", repr(value))
