"""What the sandbox's layers add to a worker's start-up, against a whole submission.

Measured in one run, interleaved so that drift affects every row alike:

- a bare `python -I -c "import torch"`: the start-up no worker can avoid;
- a worker with no layers (process level, GRADE_SANDBOX_WITHOUT=uid,landlock,seccomp):
  the supervisor, the private runtime copy and the protocol;
- a worker at the no-namespace level with every layer (process+uid+landlock+seccomp+reaper);
- a worker under bubblewrap with every layer;
- `grade submit assignment1` on the reference at both levels.

Each worker row is the time from creating the Sandbox to the answer of its first call,
then closing it (the reaper's sweep included). The added cost of the layers is the full
worker minus the bare start-up; the target is at most 10 % of a submission.

    python benchmarks/bench_sandbox.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = b"def add(x):\n    return x + 1\n"


def bare_start() -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-I", "-c", "import torch"], check=True)
    return time.perf_counter() - started


def worker_start(env: dict[str, str]) -> float:
    """Sandbox creation → first answer → closed, with the given environment switches."""
    code = ("import time, torch\n"
            "from grader.sandbox.client import Sandbox\n"
            "started = time.perf_counter()\n"
            f"with Sandbox({{'m.py': {SOURCE!r}}}, ['m.py']) as box:\n"
            "    assert box.call('add', (torch.ones(1),)).status == 'ok'\n"
            "print(time.perf_counter() - started)\n")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, **env})
    return float(out.stdout.strip().splitlines()[-1])


def submit(env: dict[str, str], html: Path) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "grader.cli", "submit", "assignment1", "--workspace",
                    "reference/assignment1", "--no-record", "--html", str(html), "--seed", "1"],
                   check=True, cwd=ROOT, stdout=subprocess.DEVNULL, env={**os.environ, **env})
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    process = {"GRADE_NO_BWRAP": "1"}
    bubblewrap = {"GRADE_NO_BWRAP": ""}
    with tempfile.TemporaryDirectory() as temp:
        html = Path(temp) / "report.html"
        rows = {
            "bare python -I -c 'import torch'": bare_start,
            "worker, no layers (process)": lambda: worker_start({**process,
                                                                 "GRADE_SANDBOX_WITHOUT": "uid,landlock,seccomp"}),
            "worker, process+uid+landlock+seccomp+reaper": lambda: worker_start(process),
            "worker, bubblewrap+uid+landlock+seccomp+reaper": lambda: worker_start(bubblewrap),
            "grade submit assignment1, process level": lambda: submit(process, html),
            "grade submit assignment1, bubblewrap level": lambda: submit(bubblewrap, html),
        }
        bare_start()  # warm the file cache once
        samples: dict[str, list[float]] = {name: [] for name in rows}
        for _ in range(args.repeats):
            for name, run in rows.items():
                samples[name].append(run())
    medians = {name: statistics.median(values) for name, values in samples.items()}
    print(f"{'what':<50} {'median s':>9} {'min s':>7} {'max s':>7}")
    for name, values in samples.items():
        print(f"{name:<50} {medians[name]:>9.3f} {min(values):>7.3f} {max(values):>7.3f}")
    bare = medians["bare python -I -c 'import torch'"]
    for level in ("process", "bubblewrap"):
        full = medians[next(n for n in rows if n.startswith(f"worker, {level}+"))]
        whole = medians[f"grade submit assignment1, {level} level"]
        added = full - bare
        print(f"{level}: the sandbox adds {added:+.3f} s to a worker's start-up = {100 * added / whole:.1f} % of "
              f"a {whole:.2f} s submission (target: at most 10 %)")
    layers = (medians["worker, process+uid+landlock+seccomp+reaper"] - medians["worker, no layers (process)"])
    print(f"of which uid+landlock+seccomp themselves: {layers:+.3f} s")


if __name__ == "__main__":
    main()
