"""Facts about one call of student code, measured where the call runs.

The worker wraps every student call in `observe()`; the trusted side judges
the facts (did it launch a Triton kernel, did it call a forbidden API, did it
allocate something quadratic). In-process mode (plain pytest) uses the same
code, so a test behaves the same in both.

Forbidden APIs are caught twice, on the thread that runs the call (a CPU worker
can start no other: grader.sandbox.seccomp_filter):

* a TorchDispatchMode sees every ATen operation the call reaches at torch's
  dispatcher (forbidden.OPERATIONS), whatever Python route led there: an alias,
  a Tensor method, torch.distributions, gumbel_softmax, torch.ops. It also
  measures the largest tensor any operation produced;
* a TorchFunctionMode sees the names of the torch functions and Tensor methods
  called (forbidden.ATTRIBUTES), which names a composite API (SDPA's math path
  reaches only _safe_softmax and bmm at the dispatcher).

Every Triton launch is recorded with its kernel's name and launch parameters:
a hint the trusted side may use to launch the same kernel itself, never proof. A call
that tracks its tensors also counts what each interpreted kernel did (loads, stores,
tl.dot work, exponentials, per program: grader.sandbox.kernel_counts).
"""

from __future__ import annotations

import contextlib
import resource
import time
from dataclasses import asdict, dataclass, field

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from grader.sandbox import kernel_counts
from grader.sandbox.forbidden import ATTRIBUTES, OPERATIONS  # the one table, static and run time

MAX_LAUNCH_RECORDS = 64  # launches kept per call (the count goes on)


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
    launches: list[dict] = field(default_factory=list)  # {"kernel", "grid", "meta"} per launch (a hint)
    kernel_counts: list[dict] = field(default_factory=list)  # per interpreted launch: grader.sandbox.kernel_counts

    def to_message(self) -> dict:
        return asdict(self)

    @classmethod
    def from_message(cls, data: dict | None) -> CallFacts:
        return cls(**data) if data else cls()


def _note_group(facts: CallFacts, groups: dict[str, frozenset[str]], name: str) -> None:
    for group, names in groups.items():
        if name in names and group not in facts.forbidden_calls:
            facts.forbidden_calls.append(group)


class _NameRecorder(TorchFunctionMode):
    """The names of the torch functions and Tensor methods a call reaches."""

    def __init__(self, groups: dict[str, frozenset[str]], facts: CallFacts):
        super().__init__()
        self.groups = groups
        self.facts = facts

    def __torch_function__(self, func, types, args=(), kwargs=None):
        _note_group(self.facts, self.groups, getattr(func, "__name__", ""))
        return func(*args, **(kwargs or {}))


class _OperationRecorder(TorchDispatchMode):
    """Every ATen operation a call reaches, and the largest tensor one produced."""

    def __init__(self, groups: dict[str, frozenset[str]], facts: CallFacts):
        super().__init__()
        self.groups = groups
        self.facts = facts


def _dispatch(self, func, types, args=(), kwargs=None):
    packet = getattr(func, "_overloadpacket", None)
    _note_group(self.facts, self.groups, getattr(packet, "__name__", ""))
    out = func(*args, **(kwargs or {}))
    self.facts.ops_seen += 1
    for tensor in out if isinstance(out, (tuple, list)) else (out,):
        if isinstance(tensor, torch.Tensor):
            self.facts.largest_tensor_numel = max(self.facts.largest_tensor_numel, tensor.numel())
    return out


# Assigned after the class is made: torch wraps a subclass's own __torch_dispatch__ to skip Dynamo,
# and that wrapper imports torch._dynamo (about 2 s) on the first operation of every worker.
_OperationRecorder.__torch_dispatch__ = _dispatch


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
_launch_records: list[dict] = []
_patched = [False]


def _plain_meta(kwargs: dict) -> dict:
    """The launch's keyword parameters that are plain numbers or flags (block sizes, num_warps...)."""
    return {k: v for k, v in kwargs.items()
            if isinstance(k, str) and k != "warmup" and type(v) in (int, bool, float)}


def _record_launch(kernel: object, kwargs: dict) -> None:
    _launches[0] += 1
    if len(_launch_records) < MAX_LAUNCH_RECORDS:
        function = getattr(kernel, "fn", None)
        grid = kwargs.get("grid")
        _launch_records.append({"kernel": str(getattr(function, "__name__", "")),
                                "grid": [int(g) for g in grid] if isinstance(grid, (tuple, list)) and
                                all(type(g) is int for g in grid) else [],
                                "meta": _plain_meta(kwargs)})


def install_triton_counter() -> None:
    """Count and record every Triton kernel launch (compiled or interpreted) in this process."""
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
            _record_launch(self, kwargs)
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
    names = {g: ATTRIBUTES[g] for g in forbidden if g in ATTRIBUTES}
    operations = {g: OPERATIONS[g] for g in forbidden if g in OPERATIONS}
    use_cuda = device.startswith("cuda") and torch.cuda.is_available()
    if use_cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        facts.memory_kind = "cuda"
    else:
        base = _rss_bytes()
    launches_before = _launches[0]
    del _launch_records[:]
    watch = bool(names or operations or track_tensors)
    start = time.perf_counter()
    counted: list[dict] = []
    try:
        with (_NameRecorder(names, facts) if watch else contextlib.nullcontext()), \
                (_OperationRecorder(operations, facts) if watch else contextlib.nullcontext()), \
                (kernel_counts.counting() if track_tensors else contextlib.nullcontext(counted)) as counted:
            yield facts
    finally:
        facts.kernel_counts = list(counted)
        if use_cuda:
            torch.cuda.synchronize()
            facts.peak_memory_bytes = max(0, torch.cuda.max_memory_allocated() - base)
        else:
            facts.peak_memory_bytes = max(0, _peak_rss_bytes() - base)
        facts.wall_s = time.perf_counter() - start
        facts.triton_launches = _launches[0] - launches_before
        facts.launches = list(_launch_records)
