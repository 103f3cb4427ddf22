"""Two ways to call a student's function, with one result type.

`SandboxRunner` (grading) sends the call to the sandbox worker.
`InProcessRunner` (plain `pytest` in a workspace, and authoring) imports the
modules here. Both return a `CallResult`, so tests behave the same in both.
"""

from __future__ import annotations

import importlib.util
import itertools
import sys
import traceback
from pathlib import Path

from grader.sandbox.client import CallResult, Sandbox
from grader.sandbox.facts import changed_inputs, observe, snapshot_inputs

_counter = itertools.count()


class SandboxRunner:
    """Calls go to the sandbox. A function that hung or crashed once is not run again:
    its later tests fail at once with the first failure's explanation, so one endless
    loop costs one timeout, not one per test."""

    def __init__(self, sandbox: Sandbox):
        self.sandbox = sandbox
        self.fatal: dict[str, CallResult] = {}

    @property
    def isolation_level(self) -> str:
        return self.sandbox.isolation.level

    def call(self, name: str, args: tuple, kwargs: dict, *, forbidden: tuple[str, ...] = (),
             track_tensors: bool = False, device: str = "cpu", fresh: bool = False,
             timeout_s: float | None = None) -> CallResult:
        if name in self.fatal:
            first = self.fatal[name]
            return CallResult(status=first.status, detail=f"{first.detail} (in an earlier test; "
                                                          f"not run again)")
        if fresh:
            self.sandbox.kill()
        result = self.sandbox.call(name, args, kwargs, forbidden=forbidden,
                                   track_tensors=track_tensors, device=device, timeout_s=timeout_s)
        if result.status in ("timeout", "crashed"):
            self.fatal[name] = result
        return result

    def time_block(self, name: str, pool, shapes, kwargs: dict, calls: list, projection_seed: int) -> CallResult:
        if name in self.fatal:
            return self.call(name, (), {})
        return self.sandbox.time_block(name, pool, shapes, kwargs, calls, projection_seed)

    def timed_outputs(self, indices: list[int]) -> CallResult:
        return self.sandbox.timed_outputs(indices)

    def frozen(self):
        return self.sandbox.frozen()


class InProcessRunner:
    """Imports the workspace's modules into this process (no isolation)."""

    isolation_level = "none (in-process)"

    def __init__(self, workspace: Path, files: tuple[str, ...]):
        self.workspace = Path(workspace)
        self.namespaces: dict[str, dict] = {}
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

    def timed_outputs(self, indices: list[int]) -> CallResult:
        return CallResult(status="ok", value=[self._timed[i] for i in indices])
