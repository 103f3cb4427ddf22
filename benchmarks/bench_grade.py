"""Wall time of `grade submit assignment1` on the reference, next to the bare
start-ups it cannot avoid, measured in the same run.

A grade needs two Python processes that import torch: the trusted process
(hidden tests, reference, verdicts) and the sandbox worker (student code).
The baseline is those two start-ups run one after the other; the overhead is
everything the grader adds on top (pytest, the suite, static checks, scoring,
report, gradebook). Target: overhead under 50 % of the baseline.

    python benchmarks/bench_grade.py [--repeats 3] [--assignment assignment1]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def wall(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--assignment", default="assignment1")
    args = parser.parse_args()
    python = sys.executable
    with tempfile.TemporaryDirectory() as temp:
        grade_cmd = [python, "-m", "grader.cli", "submit", args.assignment,
                     "--workspace", f"reference/{args.assignment}", "--no-record",
                     "--html", str(Path(temp) / "report.html"), "--seed", "1"]
        rows = {"python -c 'import torch'": [python, "-c", "import torch"],
                "python -I -c 'import torch' (worker)": [python, "-I", "-c", "import torch"],
                f"grade submit {args.assignment}": grade_cmd}
        wall(rows["python -c 'import torch'"])  # warm the file cache once
        samples = {name: [] for name in rows}
        for _ in range(args.repeats):  # interleaved, so drift affects every row alike
            for name, command in rows.items():
                samples[name].append(wall(command))
    medians = {name: statistics.median(values) for name, values in samples.items()}
    torch_start = medians["python -c 'import torch'"]
    worker_start = medians["python -I -c 'import torch' (worker)"]
    grade_time = medians[f"grade submit {args.assignment}"]
    baseline = torch_start + worker_start
    print(f"{'command':<42} {'median s':>9} {'min s':>7} {'max s':>7}")
    for name, values in samples.items():
        print(f"{name:<42} {statistics.median(values):>9.2f} {min(values):>7.2f} {max(values):>7.2f}")
    print(f"{'baseline: two torch start-ups':<42} {baseline:>9.2f}")
    overhead = (grade_time - baseline) / baseline
    print(f"grading overhead beyond the two start-ups: {grade_time - baseline:+.2f} s "
          f"= {overhead:+.0%} of the baseline (target < +50%)")


if __name__ == "__main__":
    main()
