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


def test_the_summary_shows_a_pending_timing_test(tmp_path, capsys):
    """A timing test without a GPU is pending: it has no score (results.json leaves it out)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    sys.dont_write_bytecode = True
    try:
        import gpu_summary
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    data = {"score": 90.0, "tests": [
        {"name": "flash_speed · test_flash_speed::test_speed[long]", "tags": ["flash_speed", "not_run"],
         "output": "**Pending** (worth 5 points, not judged here)", "extra_data": {"pending": True, "max_score": 5.0}},
        {"name": "flash_speed · test_flash_speed::test_speed[d128]", "tags": ["flash_speed"], "score": 3.0,
         "max_score": 5.0, "status": "passed", "output": "1\\.40× the reference time"},
        {"name": "flash_forward · test_flash_forward::test_x", "tags": ["flash_forward"], "score": 2.0,
         "max_score": 2.0, "status": "passed", "output": ""}]}
    path = tmp_path / "reference.json"
    path.write_text(json.dumps(data))
    gpu_summary.main([str(path)])
    printed = capsys.readouterr().out
    assert "pending/5" in printed and "3/5" in printed and "1.40×" in printed
    tasks = gpu_summary.task_scores(data)
    assert tasks["flash_speed"] == {"score": 3.0, "max": 10.0, "pending": 1, "tests": 2, "passed": 1}
    assert tasks["flash_forward"]["score"] == tasks["flash_forward"]["max"] == 2.0


def test_calibration_says_whether_the_handouts_solution_earns_full_speed_points():
    """The summary's calibration: the reference solution's ratio per timed shape against the first
    threshold, and where it is above, the threshold that would give it full points."""
    sys.path.insert(0, str(ROOT / "scripts"))
    sys.dont_write_bytecode = True
    try:
        import gpu_check
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    thresholds = gpu_check._speed_thresholds()
    assert thresholds[0] == (1.25, 1.0)  # the manifest's first threshold, read from assignment.toml
    held = gpu_check.calibration({"test_speed[long]": 1.08, "test_speed[long_causal_d128]": 1.21}, thresholds)
    assert held[-1] == "calibrated: the handout's solution earns every speed point (worst ratio 1.210 ≤ 1.25)"
    assert "| test_speed[long] | 1.080 | yes |" in held
    missed = gpu_check.calibration({"test_speed[long]": 1.08, "test_speed[long_causal_d128]": 1.42}, thresholds)
    assert "| test_speed[long_causal_d128] | 1.420 | no |" in missed
    assert missed[-1].startswith("NOT calibrated: the handout's solution runs at 1.420× the reference kernel")
    assert "set flash_speed's first threshold to 1.6 " in missed[-1]  # 1.42 × 1.1 = 1.562, up to 1.6
    assert gpu_check.calibration({}, thresholds)[0].startswith("not measured")


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
    assert "## Calibration: flash_speed's thresholds against the handout's solution" in summary
    assert "not measured: no verified GPU timing of the reference solution" in summary  # CPU timing is not used
    assert steps["grade_slow"]["status"] == "skipped"
    assert steps["kernel_tests"]["status"] == "ok", summary
    assert "CPU-timed" in summary  # the reference's speed test ran the protocol end to end on the CPU
    assert _status() == before  # nothing written into the checkout
