"""What an interpreted Triton kernel does, counted in the process that runs it.

Under Triton's interpreter (TRITON_INTERPRET=1) a kernel runs program after program
through one builder object whose methods load, store, multiply and exponentiate numpy
tiles. While counting is on (`counting()`, which grader.sandbox.facts.observe turns on
for a call that tracks its tensors), those methods are wrapped, and every launch gets
a record of plain numbers:

* the launch: the kernel's name, its grid, and each tensor argument's position, name
  and size in bytes (the address range its elements can occupy);
* per program (grid index x, y, z), per tensor argument: how many `tl.load` and
  `tl.store` calls touched it, how many elements they moved (masked-off lanes are not
  counted) and the widest call's lanes (its tile, masked lanes included); elements that
  fell in no argument's range are counted as `outside`;
* per program: `tl.dot` calls, their multiply-adds and their widest output tile; the
  exponentials (`tl.exp`, `tl.exp2`) of whole tiles and those of one value per row (a
  rescale factor such as e^(m − m_new)).

In a kernel worker (grading by construction) only the student's vetted kernels run,
and a vetted kernel can reach nothing but public `tl.*` operations
(grader.intake.kernels), so it cannot touch this module or the builder it wraps. The
trusted side checks the counts against what it knows (grid, output written) before it
reads anything from them (grader.harness.kernel_behaviour).

Standard library, numpy and triton only (it is copied into the worker).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator

MAX_LAUNCHES = 8  # launch records kept per call
MAX_PROGRAMS = 512  # programs recorded per launch (the totals go on)

_active: list[list[dict]] = []  # the launches of the call being counted (one list while counting)
_installed = [False]


def _tensor_range(value) -> tuple[int, int, int] | None:
    """(first byte, end byte, element size) of the memory a tensor argument's elements occupy."""
    if not (hasattr(value, "data_ptr") and hasattr(value, "stride") and hasattr(value, "shape")):
        return None
    value = getattr(value, "base", value) if type(value).__name__ == "TensorWrapper" else value
    size = value.element_size()
    if value.numel() == 0:
        return value.data_ptr(), value.data_ptr(), size
    span = 1 + sum((n - 1) * abs(s) for n, s in zip(value.shape, value.stride(), strict=True))
    return value.data_ptr(), value.data_ptr() + span * size, size


class _Launch:
    """The record of one launch being filled in."""

    def __init__(self, name: str, arguments: list[dict], ranges: list[tuple[int, int, int, int]]):
        self.record = {"kernel": name, "grid": [], "arguments": arguments, "programs": {},
                       "programs_dropped": 0}
        self.ranges = ranges  # (position, first byte, end byte, element size)
        self.program: dict | None = None

    def enter(self, index: tuple[int, int, int]) -> None:
        programs = self.record["programs"]
        key = ",".join(str(i) for i in index)
        if key not in programs and len(programs) >= MAX_PROGRAMS:
            self.record["programs_dropped"] += 1
            self.program = None
            return
        self.program = programs.setdefault(key, {"loads": {}, "stores": {}, "outside_loads": 0,
                                                 "outside_stores": 0, "dots": 0, "dot_macs": 0,
                                                 "widest_dot": 0, "tile_exps": 0, "row_exps": 0})

    def access(self, kind: str, pointers, mask) -> None:
        """One tl.load ("loads") or tl.store ("stores"): which argument it touched, how many elements."""
        if self.program is None:
            return
        import numpy as np

        addresses = np.asarray(pointers).reshape(-1)
        lanes_in_tile = int(addresses.size)
        if mask is not None:
            lanes = np.broadcast_to(np.asarray(mask), np.asarray(pointers).shape).reshape(-1)
            addresses = addresses[lanes.astype(bool)]
        if addresses.size == 0:
            return
        low, high = int(addresses.min()), int(addresses.max())
        counts = self.program[kind]
        for position, first, end, _size in self.ranges:
            if first <= low and high < end:
                entry = counts.setdefault(str(position), [0, 0, 0])
                entry[0] += 1
                entry[1] += int(addresses.size)
                entry[2] = max(entry[2], lanes_in_tile)
                return
        inside = np.zeros(addresses.shape, dtype=bool)
        for position, first, end, _size in self.ranges:
            here = (addresses >= first) & (addresses < end)
            if here.any():
                entry = counts.setdefault(str(position), [0, 0, 0])
                entry[0] += 1
                entry[1] += int(here.sum())
                entry[2] = max(entry[2], lanes_in_tile)
            inside |= here
        self.program["outside_" + kind] += int((~inside).sum())

    def dot(self, a, b) -> None:
        if self.program is None:
            return
        rows, inner = (a.shape[-2], a.shape[-1]) if a.ndim >= 2 else (1, a.shape[-1])
        cols = b.shape[-1] if b.ndim >= 2 else 1
        self.program["dots"] += 1
        self.program["dot_macs"] += int(rows * inner * cols)
        self.program["widest_dot"] = max(self.program["widest_dot"], int(rows * cols))

    def exponential(self, values) -> None:
        if self.program is None:
            return
        shape = getattr(values, "shape", ())
        if not shape or values.size == shape[0]:  # one value per row (or a scalar): a rescale factor
            self.program["row_exps"] += 1
        else:
            self.program["tile_exps"] += 1


def _current() -> _Launch | None:
    return _active[-1][-1] if _active and _active[-1] and isinstance(_active[-1][-1], _Launch) else None


def install() -> bool:
    """Wrap the interpreter's builder and grid executor once (False without Triton's interpreter)."""
    if _installed[0]:
        return True
    try:
        from triton.runtime import interpreter
    except Exception:  # no triton, or no interpreter in it: nothing to count
        return False
    builder = interpreter.InterpreterBuilder
    executor = interpreter.GridExecutor

    def wrap(cls, name: str, before):
        original = getattr(cls, name, None)
        if original is None:
            return

        def method(self, *args, __original=original, **kwargs):
            launch = _current()
            if launch is not None:
                try:
                    before(launch, self, *args, **kwargs)
                except Exception:  # counting never changes what the kernel does
                    pass
            return __original(self, *args, **kwargs)

        setattr(cls, name, method)

    wrap(builder, "set_grid_idx", lambda launch, _self, x, y, z: launch.enter((int(x), int(y), int(z))))
    wrap(builder, "set_grid_dim", lambda launch, _self, x, y, z: launch.record.__setitem__(
        "grid", [int(x), int(y), int(z)]))
    wrap(builder, "create_masked_load",
         lambda launch, _self, ptrs, mask, *_rest, **_kw: launch.access("loads", ptrs.data, mask.data))
    wrap(builder, "create_masked_store",
         lambda launch, _self, ptrs, _value, mask, *_rest, **_kw: launch.access("stores", ptrs.data, mask.data))
    wrap(builder, "create_dot", lambda launch, _self, a, b, *_rest, **_kw: launch.dot(a.data, b.data))
    for name in ("create_exp", "create_exp2"):
        wrap(builder, name, lambda launch, _self, arg, *_rest, **_kw: launch.exponential(arg.data))

    original_call = executor.__call__

    def call(self, *args, **kwargs):
        launches = _active[-1] if _active else None
        if launches is None or len(launches) >= MAX_LAUNCHES:
            return original_call(self, *args, **kwargs)
        names = list(inspect.signature(self.fn).parameters)
        arguments, ranges = [], []
        for position, value in enumerate(args):
            found = _tensor_range(value)
            if found is not None:
                first, end, size = found
                name = names[position] if position < len(names) else str(position)
                arguments.append({"position": position, "name": name, "bytes": end - first, "element_bytes": size})
                ranges.append((position, first, end, size))
        launch = _Launch(getattr(self.fn, "__name__", ""), arguments, ranges)
        launches.append(launch)
        try:
            return original_call(self, *args, **kwargs)
        finally:
            launches[launches.index(launch)] = launch.record

    executor.__call__ = call
    _installed[0] = True
    return True


@contextlib.contextmanager
def counting() -> Iterator[list[dict]]:
    """Count every interpreted launch inside the block; yields the list their records fill."""
    launches: list = []
    if not install():
        yield launches
        return
    _active.append(launches)
    try:
        yield launches
    finally:
        _active.pop()
        launches[:] = [launch.record if isinstance(launch, _Launch) else launch for launch in launches]
