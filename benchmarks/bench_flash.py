"""TFLOP/s of the course's FlashAttention kernel, torch SDPA and naive attention.

    python benchmarks/bench_flash.py                       # bf16, D 64 and 128, N 1k … 16k
    python benchmarks/bench_flash.py --dtype fp16 --lengths 1024 4096
    python benchmarks/bench_flash.py --sanity              # no GPU: a tiny interpreter check

FLOPs per forward: 4·B·H·N²·D (two N×N×D products, 2 FLOPs per multiply-add),
halved when causal. SDPA is restricted to its flash / memory-efficient backends;
the naive reference materialises the N×N scores and is skipped where they would
not fit (more than 8 GB). Without a CUDA device it prints "no CUDA device:
skipped" and exits 0 (or, with --sanity, checks the kernel through Triton's
interpreter on small shapes).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    parser.add_argument("--dims", type=int, nargs="+", default=[64, 128])
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 2048, 4096, 8192, 16384])
    parser.add_argument("--batch-heads", type=int, default=64, help="B·H (B = 4)")
    parser.add_argument("--sanity", action="store_true",
                        help="without a GPU: check the kernel on tiny shapes through Triton's interpreter")
    return parser.parse_args(argv)


def _sanity() -> int:
    os.environ["TRITON_INTERPRET"] = "1"  # before the kernels are defined
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from course_kernels.flash_attention import _test

    for dtype in (torch.float32, torch.float16):
        worst = _test(B=1, H=2, H_KV=1, N_Q=40, N_KV=40, D=16, causal=True, dtype=dtype, device="cpu")
        print(f"interpreter sanity {dtype}: worst error {worst:.2e} (forward and backward)")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    if not torch.cuda.is_available():
        if args.sanity:
            return _sanity()
        print("no CUDA device: skipped")
        return 0
    if os.environ.get("TRITON_INTERPRET") == "1":
        print("TRITON_INTERPRET=1 is set: unset it to benchmark on the GPU")
        return 0
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from course_kernels.flash_attention import bench

    print(f"GPU: {torch.cuda.get_device_name()}, B·H = {args.batch_heads}")
    bench(batch_heads=args.batch_heads, head_dims=tuple(args.dims), lengths=tuple(args.lengths),
          dtype=DTYPES[args.dtype])
    return 0


if __name__ == "__main__":
    sys.exit(main())
