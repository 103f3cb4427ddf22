"""Two gradings side by side, the grader's side on torch's default threads against one thread.

A pool (`grade batch --jobs 2`, `grade validate --jobs 2`, a server's workers) runs gradings
side by side, each a trusted process with its sandbox workers. Each process grades
assignment 3's reference (every task; the kernels through Triton's interpreter without a GPU)
`--gradings` times; two such processes start together. The rows:

* default threads: the grader's side as before grader.harness.threads (torch's default, a
  thread per core: its idle OpenMP threads spin after each parallel operation);
* one thread: as grading runs now (`run_suite` holds torch to WORKER_TORCH_THREADS).

Both modes run in this one invocation, alternating, so the machine's state affects them
alike. Wall is the pair's; CPU is the whole machine's busy time over it (/proc/stat), which
counts the sandbox workers too.

    python benchmarks/bench_threads.py [--repeats 2] [--gradings 3]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODES = ("default threads", "one thread")


def _busy_s() -> float:
    """The machine's CPU seconds spent busy since boot (every core; idle and I/O wait left out)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def child(mode: str, gradings: int) -> None:
    """Grade the reference `gradings` times in this process, in `mode`."""
    sys.path.insert(0, str(ROOT))
    from grader.core.assignment import Assignment
    from grader.core.course import Course
    from grader.harness import suite
    from grader.pipeline.grading import GradeRequest, grade, open_submission

    if mode == "default threads":
        suite.torch_threads = lambda *a, **k: contextlib.nullcontext()  # the grader's side as it was
    assignment = Assignment.load(Course(ROOT), "assignment3")
    for _ in range(gradings):  # the reference solution, as `grade submit --workspace reference/assignment3`
        submission = open_submission(assignment, ROOT / "reference" / "assignment3", student="bench")
        result = grade(assignment, submission, GradeRequest(seed=1, allow_weak_sandbox=True))
        assert result.score.total > 0, result.score


def pair(mode: str, gradings: int) -> tuple[float, float]:
    """Two child processes side by side: (wall s, machine CPU s)."""
    env = {**os.environ, **({} if shutil.which("nvidia-smi") else {"TRITON_INTERPRET": "1"})}  # as `grade` sets it
    busy = _busy_s()
    started = time.perf_counter()
    children = [subprocess.Popen([sys.executable, __file__, "--child", mode, "--gradings", str(gradings)],
                                 cwd=ROOT, env=env) for _ in range(2)]
    if any(c.wait() != 0 for c in children):
        raise SystemExit(f"a child failed in mode {mode!r}")
    wall = time.perf_counter() - started
    return wall, _busy_s() - busy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--gradings", type=int, default=3)
    parser.add_argument("--child", choices=MODES)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.gradings)
        return
    samples: dict[str, list[tuple[float, float]]] = {mode: [] for mode in MODES}
    for _ in range(args.repeats):  # alternating, so drift affects both modes alike
        for mode in MODES:
            samples[mode].append(pair(mode, args.gradings))
    print(f"two processes side by side, {args.gradings} gradings each of assignment 3's reference; "
          f"{os.cpu_count()} cores; median of {args.repeats}")
    print(f"{'grader side':<18} {'wall s':>8} {'CPU s':>8}")
    medians = {}
    for mode, rows in samples.items():
        medians[mode] = (statistics.median(w for w, _ in rows), statistics.median(c for _, c in rows))
        print(f"{mode:<18} {medians[mode][0]:>8.1f} {medians[mode][1]:>8.1f}")
    (wall_d, cpu_d), (wall_1, cpu_1) = medians["default threads"], medians["one thread"]
    print(f"one thread against the default: wall {wall_1 / wall_d:.2f}×, CPU {cpu_1 / cpu_d:.2f}×")


if __name__ == "__main__":
    main()
