"""One timed block of calls, run the same way for the student and the reference.

The student's block runs in the sandbox worker and the reference's in the trusted
process (a process of its own: a student's kernel never shares a CUDA context with
the reference's outputs), through this one function, so both pay exactly the same
overheads. What decides points is computed outside the worker (grader.harness.timing);
this module only times the calls and makes the work honest to do and hard to skip:

- Inputs are fresh for every call: views at random offsets into a seeded
  random pool (`make_pool`), so no two calls see the same tensors and no
  output can be cached by identity or content. Offsets are chosen by the
  trusted side and arrive with the request.
- The L2 cache is flushed before every call on a GPU, before its start event:
  outside the timed region.
- Each call is timed on its own: between two CUDA events on a GPU, by the
  process's clock on the CPU (`Block.event_ms`). grader.harness.timing believes a
  worker's figures only from the kernel worker, and never beyond the trusted
  clock around the whole block.
- Every output is kept until the next block, and the block returns one
  checksum per output: its float64 dot product with a seeded random vector.
  The checksums need every output finished, so the worker cannot answer
  before its GPU work is done; the trusted side compares them with the
  reference's and asks for a few outputs (or spans of them), chosen afterwards.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

L2_FLUSH_BYTES = 256 * 1024 * 1024  # larger than any current GPU's L2 (H100/H200: 50 MiB)
ALIGN = 64  # elements: every view starts 128-byte aligned in fp16, 256 in fp32


@dataclass(frozen=True)
class PoolSpec:
    """The random pool that a block's inputs are views of."""

    seed: int
    numel: int
    dtype: str  # "float16", "float32", ...
    device: str

    def to_message(self) -> dict:
        return {"seed": self.seed, "numel": self.numel, "dtype": self.dtype, "device": self.device}

    @classmethod
    def from_message(cls, data: dict) -> PoolSpec:
        return cls(int(data["seed"]), int(data["numel"]), str(data["dtype"]), str(data["device"]))


def make_pool(spec: PoolSpec) -> torch.Tensor:
    """Standard normal values, the same for the same spec in any process on the same kind of device."""
    generator = torch.Generator(device=spec.device).manual_seed(spec.seed)
    values = torch.randn(spec.numel, generator=generator, dtype=torch.float32, device=spec.device)
    return values.to(getattr(torch, spec.dtype))


def pool_size(shapes: Sequence[Sequence[int]]) -> int:
    """A pool twice as large as one call's inputs, so that offsets vary widely."""
    return 2 * sum(_numel(shape) + ALIGN for shape in shapes)


def _numel(shape: Sequence[int]) -> int:
    count = 1
    for size in shape:
        count *= int(size)
    return count


def random_offsets(shapes: Sequence[Sequence[int]], numel: int, calls: int, generator) -> list[list[int]]:
    """Aligned start offsets of each argument, for each call (`generator`: a random.Random)."""
    plan = []
    for _ in range(calls):
        plan.append([generator.randrange(0, (numel - _numel(shape)) // ALIGN + 1) * ALIGN for shape in shapes])
    return plan


def inputs_at(pool: torch.Tensor, shapes: Sequence[Sequence[int]], offsets: Sequence[int]) -> list[torch.Tensor]:
    """The call's tensors: contiguous views of the pool."""
    return [pool[start:start + _numel(shape)].view(*shape) for shape, start in zip(shapes, offsets, strict=True)]


def projection(numel: int, seed: int, device: str) -> torch.Tensor:
    generator = torch.Generator(device=device).manual_seed(seed)
    return torch.randn(numel, generator=generator, dtype=torch.float64, device=device)


def checksum(output: object, vector: torch.Tensor | None) -> float:
    """float64 dot product of the output with the projection vector (NaN when not a tensor)."""
    if not isinstance(output, torch.Tensor) or vector is None or output.numel() != vector.numel():
        return float("nan")
    return float((output.detach().reshape(-1).to(vector.device, torch.float64) * vector).sum())


@dataclass
class Block:
    """What a block returns, plus the outputs it keeps for the sampled check."""

    checksums: list[float]
    event_ms: list[float]
    outputs: list[object]


def run_block(function: Callable, pool: torch.Tensor, shapes: Sequence[Sequence[int]], calls: Sequence[Sequence[int]],
              kwargs: dict, projection_seed: int, device: str, flush_bytes: int = L2_FLUSH_BYTES) -> Block:
    """Call `function` once per offset list; keep the outputs; checksum them at the end."""
    use_cuda = device.startswith("cuda") and torch.cuda.is_available()
    flush = torch.empty(flush_bytes // 4, dtype=torch.int32, device=device) if use_cuda else None
    outputs: list[object] = []
    events = []
    wall_ms = []
    if use_cuda:
        torch.cuda.synchronize()
    for offsets in calls:
        args = inputs_at(pool, shapes, offsets)
        if use_cuda:
            flush.zero_()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            outputs.append(function(*args, **kwargs))
            end.record()
            events.append((start, end))
        else:
            started = time.perf_counter()
            outputs.append(function(*args, **kwargs))
            wall_ms.append((time.perf_counter() - started) * 1e3)
    if use_cuda:
        torch.cuda.synchronize()
        wall_ms = [start.elapsed_time(end) for start, end in events]
    first = next((o for o in outputs if isinstance(o, torch.Tensor)), None)
    vector = projection(first.numel(), projection_seed, device) if first is not None else None
    return Block([checksum(o, vector) for o in outputs], wall_ms, outputs)
