"""scripts/gpu_check.sh on a machine without a GPU: every step that needs none runs, each GPU step
is named as skipped, and exactly one archive and one summary are left in the output folder.

The GPU path itself can only run on a GPU; this is the path every CPU machine takes, end to end
(the real script, the real sandbox, the real hidden suite of assignment 3 through the interpreter).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


def _status() -> set[str]:
    """The checkout's changed, new and ignored paths, bar bytecode and linter caches (a developer's
    own runs write those meanwhile)."""
    listed = subprocess.run(["git", "status", "--porcelain", "--ignored", "--untracked-files=all"], cwd=ROOT,
                            capture_output=True, text=True).stdout
    return {line[3:] for line in listed.splitlines() if "__pycache__" not in line and ".ruff_cache" not in line}


@pytest.mark.slow
@pytest.mark.sandbox
def test_the_gpu_check_without_a_gpu_runs_every_other_step(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present: the GPU path runs instead (minutes of GPU time)")
    out = tmp_path / "out"
    before = _status()
    env = {**os.environ, "PYTHON": sys.executable}
    env.pop("TRITON_INTERPRET", None)
    done = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh"), str(out)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=1700)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert sorted(p.name for p in out.iterdir()) == ["gpu-check.tar.gz", "summary.md"]  # one archive, one summary
    summary = (out / "summary.md").read_text()
    with tarfile.open(out / "gpu-check.tar.gz") as archive:
        names = set(archive.getnames())
        steps = {s["step"]: s for s in json.load(archive.extractfile("gpu-check/steps.json"))}
    assert {"gpu-check/summary.md", "gpu-check/reference.json", "gpu-check/setup.log"} <= names
    for gpu_step in ("bench", "repeatability", "attacks"):  # each GPU step named, with why it was skipped
        assert steps[gpu_step]["status"] == "skipped" and "needs a CUDA GPU" in steps[gpu_step]["reason"]
        assert f"| {gpu_step} | skipped |" in summary
    assert steps["nvidia_smi_before"]["status"] == "skipped" or "nvidia_smi_before" in steps
    assert steps["sandbox"]["status"] == "ok" and "- cuda: no CUDA device on this host" in summary
    assert steps["grade_reference"]["status"] == "ok" and steps["grade_reference"]["as_expected"], summary
    assert steps["grade_wrong"]["status"] == "ok" and steps["grade_wrong"]["as_expected"], summary
    assert steps["grade_slow"]["status"] == "skipped"
    assert steps["kernel_tests"]["status"] == "ok", summary
    assert "CPU-timed" in summary  # the reference's speed test ran the protocol end to end on the CPU
    assert _status() == before  # nothing written into the checkout
