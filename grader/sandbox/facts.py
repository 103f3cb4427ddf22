"""Facts about one call of student code, measured where the call runs.

The worker wraps every student call in `observe()`; the trusted side judges
the facts (did it launch a Triton kernel, did it call a forbidden API, did it
allocate something quadratic). In-process mode (plain pytest) uses the same
code, so a test behaves the same in both.

Forbidden APIs are caught through a TorchFunctionMode: torch's C++ bindings
consult it for every torch function and Tensor method, so an alias, a
getattr trick or a method call is seen the same way as the plain call.
"""

from __future__ import annotations

import contextlib
import resource
import time
from dataclasses import asdict, dataclass, field

import torch
from torch.overrides import TorchFunctionMode

from grader.sandbox.forbidden import ATTRIBUTES  # the one table: static names double as run-time ones


@dataclass
class CallFacts:
    """What one student call did, as measured by the process that ran it."""

    wall_s: float = 0.0
    triton_launches: int = 0
    forbidden_calls: list[str] = field(default_factory=list)
    largest_tensor_numel: int = 0
    ops_seen: int = 0
    peak_memory_bytes: int = 0
    memory_kind: str = "rss"  # rss | cuda
    mutated_inputs: list[str] = field(default_factory=list)
    memory_measured_by: str = "worker"  # "grader" when read from /proc from outside the worker

    def to_message(self) -> dict:
        return asdict(self)

    @classmethod
    def from_message(cls, data: dict | None) -> CallFacts:
        return cls(**data) if data else cls()


class _Recorder(TorchFunctionMode):
    def __init__(self, groups: dict[str, frozenset[str]], facts: CallFacts):
        super().__init__()
        self.groups = groups
        self.facts = facts

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        for group, names in self.groups.items():
            if name in names and group not in self.facts.forbidden_calls:
                self.facts.forbidden_calls.append(group)
        out = func(*args, **(kwargs or {}))
        self.facts.ops_seen += 1
        for tensor in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(tensor, torch.Tensor):
                self.facts.largest_tensor_numel = max(
                    self.facts.largest_tensor_numel, tensor.numel()
                )
        return out


def snapshot_inputs(args: tuple, kwargs: dict) -> dict[str, torch.Tensor]:
    """Copies of the tensor arguments, to tell afterwards whether the call changed them."""
    named = {f"argument {i + 1}": a for i, a in enumerate(args)}
    named.update({f"argument {k!r}": v for k, v in kwargs.items()})
    return {k: v.detach().clone() for k, v in named.items() if isinstance(v, torch.Tensor)}


def changed_inputs(before: dict[str, torch.Tensor], args: tuple, kwargs: dict) -> list[str]:
    named = {f"argument {i + 1}": a for i, a in enumerate(args)}
    named.update({f"argument {k!r}": v for k, v in kwargs.items()})
    return [k for k, old in before.items()
            if not torch.equal(old, named[k]) and not (old.isnan().any() and named[k].isnan().any())]


_launches = [0]
_patched = [False]


def install_triton_counter() -> None:
    """Count every Triton kernel launch (compiled or interpreted) in this process."""
    if _patched[0]:
        return
    _patched[0] = True
    try:
        from triton.runtime import jit as triton_jit
    except Exception:  # no triton: nothing can be launched
        return
    targets = [triton_jit.JITFunction]
    try:
        from triton.runtime.interpreter import InterpretedFunction

        targets.append(InterpretedFunction)
    except Exception:
        pass
    for cls in targets:
        original = cls.run

        def run(self, *args, __original=original, **kwargs):
            _launches[0] += 1
            return __original(self, *args, **kwargs)

        cls.run = run


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * resource.getpagesize()
    except OSError:
        return 0


def _peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@contextlib.contextmanager
def observe(forbidden: tuple[str, ...] = (), track_tensors: bool = False, device: str = "cpu"):
    """Run a student call under observation; yields the CallFacts being filled in."""
    facts = CallFacts()
    install_triton_counter()
    groups = {g: ATTRIBUTES[g] for g in forbidden if g in ATTRIBUTES}
    use_cuda = device.startswith("cuda") and torch.cuda.is_available()
    if use_cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        facts.memory_kind = "cuda"
    else:
        base = _rss_bytes()
    launches_before = _launches[0]
    mode = _Recorder(groups, facts) if (groups or track_tensors) else contextlib.nullcontext()
    start = time.perf_counter()
    try:
        with mode:
            yield facts
    finally:
        if use_cuda:
            torch.cuda.synchronize()
            facts.peak_memory_bytes = max(0, torch.cuda.max_memory_allocated() - base)
        else:
            facts.peak_memory_bytes = max(0, _peak_rss_bytes() - base)
        facts.wall_s = time.perf_counter() - start
        facts.triton_launches = _launches[0] - launches_before
