"""Wall time of each assignment's hidden suite on its reference, as an author runs it.

One pass is `pytest reference/<id>/tests` on the reference (plain pytest, the
`check` fixture importing the workspace in this process), with Triton through
its interpreter (TRITON_INTERPRET=1) where there is no GPU. Every assignment runs
in a fresh child process; the first pass pays the imports (torch, the reference,
the kernels), the later ones are what a warm author's loop costs. Targets: a
warm pass of assignment1 under 10 s; assignment3 (the Triton interpreter) under
120 s on a CPU.

    python benchmarks/bench_hidden_suites.py [--repeats 2] [--assignments assignment1 assignment3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGETS_S = {"assignment1": 10.0, "assignment3": 120.0}


def passes(assignment: str, repeats: int, seed: int) -> list[float]:
    """In this process: `repeats` passes of the hidden suite on the reference, each one's seconds."""
    import pytest

    tests, workspace = ROOT / "reference" / assignment / "tests", ROOT / "reference" / assignment
    seconds = []
    for _ in range(repeats):
        started = time.perf_counter()
        code = pytest.main([str(tests), "-q", "-p", "no:cacheprovider", "--no-header", "--import-mode=importlib",
                            f"--grade-seed={seed}", "--grade-workspace", str(workspace)])
        seconds.append(time.perf_counter() - started)
        if code != pytest.ExitCode.OK:
            raise SystemExit(f"{assignment}: the hidden suite does not pass on the reference (pytest exit {code})")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--seed", type=int, default=20261214)
    parser.add_argument("--assignments", nargs="+", default=["assignment1", "assignment2", "assignment3"])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        with open(os.devnull, "w") as quiet:
            stdout, sys.stdout = sys.stdout, quiet
            try:
                seconds = passes(args.child, args.repeats, args.seed)
            finally:
                sys.stdout = stdout
        print(json.dumps(seconds))
        return
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    if "TRITON_INTERPRET" not in env:
        import torch

        if not torch.cuda.is_available():
            env["TRITON_INTERPRET"] = "1"
    print(f"{'assignment':<12} {'first pass':>11} {'warm pass':>10} {'target':>8}")
    for assignment in args.assignments:
        out = subprocess.run([sys.executable, __file__, "--child", assignment, "--repeats", str(args.repeats),
                              "--seed", str(args.seed)], cwd=ROOT, env=env, capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"{assignment}: {out.stderr.strip()[-500:] or out.stdout.strip()[-500:]}")
        seconds = json.loads(out.stdout.strip().splitlines()[-1])
        warm = f"{statistics.median(seconds[1:]):.2f} s" if len(seconds) > 1 else "-"
        target = f"{TARGETS_S[assignment]:g} s" if assignment in TARGETS_S else "-"
        print(f"{assignment:<12} {seconds[0]:>9.2f} s {warm:>10} {target:>8}")


if __name__ == "__main__":
    main()
