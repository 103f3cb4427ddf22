"""Every GPU number of the course in one run, for a GPU that may be lent for minutes (scripts/gpu_check.sh).

    python3 scripts/gpu_check.py OUT            # the whole check; OUT gets gpu-check.tar.gz and summary.md

Each step runs in a child process with a time limit (a CUDA fault or a hang ends that step, not
the check), in this order of importance, until the budget (GPU_CHECK_BUDGET_S; 440 s on a GPU,
1800 s without) is spent:

1. environment: versions, and nvidia-smi's clocks, power and temperature (again at the end);
2. sandbox: `grade sandbox` (the level the grades below were measured at, CUDA tried in the worker);
3. bench (GPU): TFLOP/s of the reference kernel (course_kernels.flash_attention, autotuned) and of
   torch SDPA's flash and cuDNN backends, N 4096 and 16384, D 64 and 128, causal and not, bf16 and
   fp16, each call's own time by CUDA events with the L2 cache flushed before it (the timing
   protocol's clock), and triton.testing.do_bench's figure for the reference kernel beside it;
4. repeatability (GPU): the timing protocol (grader.harness.timing) on the reference against itself
   at the timed shapes: the ratio's bias and spread, the verdicts, the rounds the stop rule took;
5. grading: `grade submit assignment3` on the reference, a slow (16 × 16 tiles) and a wrong
   (the running sum never rescaled) kernel, with what each must score;
6. attacks (GPU): the timing attacks of tests/test_attacks.py timed on the GPU;
7. kernel tests: tests/test_kernels.py (natively on a GPU, bf16 where the GPU has it) and tests/test_timing.py.

Without a GPU every step that needs none still runs (grading through Triton's interpreter, timed
on the CPU) and each GPU step is named as skipped. The summary says what ran, what passed and why
anything was skipped; the archive holds every log, results.json and report.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Under 8 minutes on a GPU with setup and packing; without one the interpreter grades slowly, and no
# GPU is waiting, so every step that needs none still gets its time.
BUDGET_S = float(os.environ.get("GPU_CHECK_BUDGET_S", "0") or 0)
LENGTHS = (4096, 16384)
HEAD_DIMS = (64, 128)
BATCH_HEADS = {4096: (4, 16), 16384: (1, 16)}  # B, H: enough programs, under 30 ms a call
SMI_FIELDS = ("name,pstate,clocks.sm,clocks.mem,clocks.max.sm,power.draw,power.limit,temperature.gpu,"
              "utilization.gpu,memory.used")


def has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


# ------------------------------------------------------------------ GPU children (subcommands)

def _own_time_ms(fn, max_calls: int = 200, max_s: float = 3.0) -> tuple[float, float, int]:
    """Mean per-call time by CUDA events, the L2 flushed before each start event; stops at a 1%
    standard error (after 10 calls), `max_calls` or `max_s`. → (mean ms, relative SE, calls)."""
    import torch

    from grader.sandbox.timer import L2_FLUSH_BYTES

    flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times: list[float] = []
    started = time.perf_counter()
    while len(times) < max_calls:
        pairs = []
        for _ in range(10):
            flush.zero_()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            pairs.append((start, end))
        torch.cuda.synchronize()
        times += [s.elapsed_time(e) for s, e in pairs]
        mean = statistics.fmean(times)
        se = statistics.stdev(times) / len(times) ** 0.5 / mean
        if se < 0.01 or time.perf_counter() - started > max_s:
            break
    return mean, se, len(times)


def _bench_row(q, k, v, causal: bool, flops: float) -> dict:
    """One shape: each implementation's own time per call and TFLOP/s, or why it could not run."""
    import triton
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention

    from course_kernels.flash_attention import attention

    def sdpa(backend):
        def run():
            with sdpa_kernel([backend]):
                return scaled_dot_product_attention(q, k, v, is_causal=causal)
        return run

    cudnn = getattr(SDPBackend, "CUDNN_ATTENTION", None)
    candidates = {"reference": lambda: attention(q, k, v, causal), "sdpa_flash": sdpa(SDPBackend.FLASH_ATTENTION),
                  "sdpa_cudnn": sdpa(cudnn) if cudnn is not None else None}
    row: dict = {}
    for name, fn in candidates.items():
        if fn is None:
            row[name] = {"error": "this torch has no cuDNN attention backend"}
            continue
        try:
            mean, se, calls = _own_time_ms(fn)
            row[name] = {"tflops": flops / (mean * 1e-3) / 1e12, "ms": mean, "rel_se": se, "calls": calls}
        except Exception as exc:  # a backend this GPU or build lacks: said, not fatal
            row[name] = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
    try:
        row["reference_do_bench_ms"] = triton.testing.do_bench(candidates["reference"])
    except Exception as exc:
        row["reference_do_bench_ms"] = None
        row["do_bench_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
    return row


def bench(path: Path) -> None:
    """Subcommand: the TFLOP/s table as JSON rows, written after each row (a later fault keeps them)."""
    import torch

    from course_kernels.flash_attention import attention_flops
    from grader.harness.device_caps import native_bfloat16

    dtypes = [("bf16", torch.bfloat16)] if native_bfloat16() else []
    dtypes.append(("fp16", torch.float16))
    rows = []
    for dtype_name, dtype in dtypes:
        for head_dim in HEAD_DIMS:
            for causal in (False, True):
                for n in LENGTHS:
                    batch, heads = BATCH_HEADS[n]
                    q, k, v = (torch.randn(batch, heads, n, head_dim, device="cuda", dtype=dtype) for _ in range(3))
                    row = {"dtype": dtype_name, "D": head_dim, "causal": causal, "N": n, "B": batch, "H": heads,
                           **_bench_row(q, k, v, causal, attention_flops(batch, heads, n, head_dim, causal))}
                    rows.append(row)
                    path.write_text(json.dumps(rows, indent=1))
                    del q, k, v
                    torch.cuda.empty_cache()


class _ReferenceWorker:
    """The reference kernel standing in for a kernel worker (its own call times believed), in process."""

    trusted_call_times = True

    def __init__(self, function):
        self.function = function
        self.pools: dict = {}
        self.outputs: list = []

    def time_block(self, name, spec, shapes, kwargs, calls, projection_seed):
        from grader.sandbox.client import CallResult
        from grader.sandbox.timer import make_pool, run_block

        if spec not in self.pools:
            self.pools = {spec: make_pool(spec)}
        block = run_block(self.function, self.pools[spec], shapes, calls, kwargs, projection_seed, spec.device)
        self.outputs = block.outputs
        return CallResult(status="ok", value={"checksums": block.checksums, "event_ms": block.event_ms})

    def timed_outputs(self, indices, spans=None):
        from grader.harness.timing import take_spans
        from grader.sandbox.client import CallResult

        spans = spans or [None] * len(indices)
        return CallResult(status="ok", value=[(self.outputs[i] if s is None else take_spans(self.outputs[i], s)).cpu()
                                              for i, s in zip(indices, spans, strict=True)])


def repeatability(path: Path, repeats: int = 3) -> None:
    """Subcommand: the protocol timing the reference against itself at the graded shapes."""
    from course_kernels.flash_attention import attention, attention_flops
    from grader.harness.timing import TimingCase, compare_speed

    shapes = {"long": (4, 16, 4096, 64, False), "long_causal_d128": (4, 16, 4096, 128, True)}  # test_flash_speed
    runs = []
    for case_id, (batch, heads, n, head_dim, causal) in shapes.items():
        shape = (batch, heads, n, head_dim)
        case = TimingCase(shapes=(shape, shape, shape), dtype="float16", kwargs={"causal": causal},
                          flops=attention_flops(batch, heads, n, head_dim, causal))
        for seed in range(repeats):
            started = time.perf_counter()
            result = compare_speed(_ReferenceWorker(attention), "attention", attention, case, device="cuda", seed=seed)
            runs.append({"case": case_id, "seed": seed, "ratio": result.ratio, "low": result.ratio_low,
                         "high": result.ratio_high, "verdict": result.verdict, "rounds": result.rounds,
                         "stopped_by": result.stopped_by, "calls": result.calls, "verified": result.verified,
                         "problems": list(result.problems), "reference_ms": result.reference.mean_ms,
                         "tflops": case.flops / (result.reference.mean_ms * 1e-3) / 1e12,
                         "seconds": time.perf_counter() - started})
            path.write_text(json.dumps(runs, indent=1))


# ------------------------------------------------------------------ the check (orchestration)

class Check:
    def __init__(self, work: Path):
        self.work = work
        self.started = time.monotonic()
        self.steps: list[dict] = []
        self.gpu = has_gpu()
        self.budget = BUDGET_S or (440.0 if self.gpu else 1800.0)

    def left(self) -> float:
        return self.budget - (time.monotonic() - self.started)

    def skip(self, name: str, reason: str) -> None:
        self.steps.append({"step": name, "status": "skipped", "reason": reason, "seconds": 0.0})
        print(f"gpu_check: {name}: skipped ({reason})", flush=True)

    def run(self, name: str, command: list[str], limit: float, env: dict | None = None,
            needs_gpu: bool = False) -> dict | None:
        """Run one step's command with its log in the archive; None when skipped."""
        if needs_gpu and not self.gpu:
            self.skip(name, "needs a CUDA GPU; there is none here")
            return None
        limit = min(limit, self.left())
        if limit < 10:
            self.skip(name, f"the time budget ({self.budget:.0f} s) is spent")
            return None
        log = self.work / f"{name}.log"
        print(f"gpu_check: {name} (at most {limit:.0f} s)", flush=True)
        started = time.monotonic()
        full_env = {**os.environ, **(env or {})}
        try:
            with log.open("w") as out:
                done = subprocess.run(command, cwd=ROOT, env=full_env, stdout=out, stderr=subprocess.STDOUT,
                                      timeout=limit, stdin=subprocess.DEVNULL)
            status = "ok" if done.returncode == 0 else f"exit {done.returncode}"
        except subprocess.TimeoutExpired:
            status = f"stopped at its limit ({limit:.0f} s)"
        step = {"step": name, "status": status, "seconds": round(time.monotonic() - started, 1), "log": log.name}
        self.steps.append(step)
        return step


def _smi(check: Check, when: str) -> str:
    if shutil.which("nvidia-smi") is None:
        check.skip(f"nvidia_smi_{when}", "nvidia-smi is not installed")
        return "nvidia-smi: not installed"
    check.run(f"nvidia_smi_{when}", ["nvidia-smi", f"--query-gpu={SMI_FIELDS}", "--format=csv"], 30)
    return (check.work / f"nvidia_smi_{when}.log").read_text().strip()


def _tail(path: Path, lines: int = 3) -> str:
    if not path.exists():
        return ""
    return " | ".join(line.strip() for line in path.read_text(errors="replace").splitlines()[-lines:] if line.strip())


def _wrong_kernel(folder: Path) -> None:
    """The reference with the running sum never rescaled (l = l + Σp: a misconception of §24)."""
    shutil.copytree(ROOT / "reference" / "assignment3", folder,
                    ignore=shutil.ignore_patterns("tests", "mutants.py", "__pycache__", "__init__.py"))
    source = (folder / "flash.py").read_text()
    wrong = source.replace("l_i = l_i * alpha + tl.sum(p, 1)", "l_i = l_i + tl.sum(p, 1)", 1)
    if wrong == source:
        raise RuntimeError("the reference flash.py no longer has the line the wrong kernel changes")
    (folder / "flash.py").write_text(wrong)


def _grading(check: Check, level_ok: bool) -> list[dict]:
    """grade submit assignment3 on three kernels; each result checked against what it must score."""
    sys.dont_write_bytecode = True  # nothing written into the checkout
    sys.path.insert(0, str(ROOT / "scripts"))
    from gpu_summary import task_scores, timing_rows

    subs = check.work / "submissions"
    subs.mkdir(exist_ok=True)
    reference = subs / "reference"
    shutil.copytree(ROOT / "reference" / "assignment3", reference,
                    ignore=shutil.ignore_patterns("tests", "mutants.py", "__pycache__", "__init__.py"))
    made = subprocess.run([sys.executable, str(ROOT / "scripts" / "make_slow_kernel.py"), str(subs / "slow")],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    if made.returncode != 0:
        check.skip("grade_slow", f"make_slow_kernel.py failed: {made.stderr[-200:]}")
    _wrong_kernel(subs / "wrong")
    env = {"COURSE_KERNELS_MAX_CONFIGS": "2", "GRADE_GRADEBOOK": str(check.work / "gradebook.sqlite")}
    if not check.gpu:
        env["TRITON_INTERPRET"] = "1"
    results = []
    for name in ("reference", "slow", "wrong"):
        if not (subs / name).is_dir():
            continue
        if name == "slow" and not check.gpu:
            check.skip("grade_slow", "its point is its GPU time (its correctness is the reference's); "
                                     "tests/test_assignment3_content.py grades it on the CPU")
            continue
        json_path, html_path = check.work / f"{name}.json", check.work / f"{name}.html"
        # Without a GPU the reference alone is timed (on the CPU, through the interpreter: the protocol runs
        # end to end); the slow kernel's interpreted timing would take minutes and prove nothing more.
        timing = ["--timing-device", "cuda" if check.gpu else ("cpu" if name == "reference" else "auto")]
        command = [sys.executable, "-m", "grader.cli", "submit", "assignment3", "--workspace", str(subs / name),
                   "--student", name, "--no-record", "--seed", "1", "--json", str(json_path),
                   "--html", str(html_path), *timing, *([] if level_ok else ["--allow-weak-sandbox"])]
        limit = (150 if name == "reference" else 100) if check.gpu else 400
        step = check.run(f"grade_{name}", command, limit, env=env)
        if step is None:
            continue
        if not json_path.exists():
            step["expectation"] = "no results.json: " + _tail(check.work / f"grade_{name}.log")
            results.append({"name": name})
            continue
        data = json.loads(json_path.read_text())
        tasks = task_scores(data)
        speed = tasks.get("flash_speed", {})
        forward = tasks.get("flash_forward", {})
        full = lambda t: t.get("max", 0) > 0 and abs(t["score"] - t["max"]) < 1e-6 and not t.get("pending")
        if name == "reference":
            others = {k: t for k, t in tasks.items() if k != "flash_speed"}
            ok = all(abs(t["score"] - t["max"]) < 1e-6 for t in others.values() if not t["pending"])
            ok = ok and (full(speed) if check.gpu else True)
            expected = "every task full marks" + (", speed included" if check.gpu else " (speed CPU-timed, not judged)")
        elif name == "slow":
            ok = full(forward) and (speed.get("score", 0) < speed.get("max", 0) if check.gpu else True)
            expected = "forward full marks, speed below full" if check.gpu else "forward full marks"
        else:
            ok = forward.get("score", 0) < forward.get("max", 0) and speed.get("score", 0) == 0
            expected = "forward below full marks, no speed points"
        step["expectation"] = f"{'as expected' if ok else 'NOT as expected'}: {expected}"
        step["as_expected"] = ok
        results.append({"name": name, "score": data.get("score"), "tasks": tasks, "timing": timing_rows(data),
                        "sandbox_level": (data.get("extra_data") or {}).get("sandbox_level"),
                        "ratios": {entry["name"].split(":")[0]: float(entry["value"])
                                   for entry in data.get("leaderboard") or [] if "reference" in entry["name"]}})
    return results


def _cell(row: dict, key: str) -> str:
    entry = row.get(key) or {}
    return f"{entry['tflops']:.1f}" if "tflops" in entry else "n/a: " + str(entry.get("error", "-"))[:60]


def _bench_line(row: dict) -> str:
    ours, flash = (row.get("reference") or {}), (row.get("sdpa_flash") or {})
    relative = f"{ours['tflops'] / flash['tflops']:.2f}" if "tflops" in ours and "tflops" in flash else "-"
    do_bench = row.get("reference_do_bench_ms")
    by_do_bench = f"{ours['tflops'] * ours['ms'] / do_bench:.1f}" if do_bench and "ms" in ours else "-"
    return (f"| {row['dtype']} | {row['D']} | {row['causal']} | {row['N']} | {_cell(row, 'reference')} | "
            f"{by_do_bench} | {_cell(row, 'sdpa_flash')} | {_cell(row, 'sdpa_cudnn')} | {relative} |")


def calibration(ratios: dict[str, float], thresholds: list[tuple[float, float]]) -> list[str]:
    """Whether the reference solution (reference/assignment3/flash.py: what a student can write from the
    handout) earns full speed points at each timed shape, and if not, the first threshold that would
    give it them with a tenth to spare: `ratios` maps a timed test to its time / the reference
    kernel's; `thresholds` are flash_speed's [ratio, fraction] pairs from the manifest."""
    if not ratios:
        return ["not measured: no verified GPU timing of the reference solution (see the steps)"]
    first = thresholds[0][0]
    lines = ["| timed test | reference solution / reference kernel | full speed points (ratio ≤ "
             f"{first:g}) |", "|---|---|---|"]
    lines += [f"| {name} | {ratio:.3f} | {'yes' if ratio <= first else 'no'} |"
              for name, ratio in sorted(ratios.items())]
    worst = max(ratios.values())
    if worst <= first:
        lines += ["", f"calibrated: the handout's solution earns every speed point (worst ratio {worst:.3f} ≤ "
                      f"{first:g})"]
    else:
        suggested = math.ceil(worst * 1.1 * 20) / 20  # a tenth of room, to the next 0.05
        lines += ["", f"NOT calibrated: the handout's solution runs at {worst:.3f}× the reference kernel, above the "
                      f"first threshold {first:g}; set flash_speed's first threshold to {suggested:g} in "
                      f"assignments/assignment3/assignment.toml (and the handout's table), or speed up the solution"]
    return lines


def _speed_thresholds() -> list[tuple[float, float]]:
    from grader.core.manifest import load_manifest

    task = load_manifest(ROOT / "assignments" / "assignment3" / "assignment.toml").task("flash_speed")
    return [(t.ratio, t.fraction) for t in task.speed]


def _summary(check: Check, env_text: str, smi_before: str, smi_after: str, sandbox_text: str, grading: list[dict],
             bench_rows: list[dict], repeat_runs: list[dict]) -> str:
    lines = ["# GPU check", "", f"GPU: {'yes' if check.gpu else 'none (every GPU step skipped, named below)'}",
             f"total: {time.monotonic() - check.started:.0f} s of a {check.budget:.0f} s budget", "", "## Environment",
             "", "```", env_text.strip(), "```", "", "nvidia-smi before:", "```", smi_before, "```",
             "nvidia-smi after:", "```", smi_after, "```", "", "## Sandbox level", "", "```",
             sandbox_text.strip() or "(no output)", "```", "", "## Steps", "",
             "| step | status | seconds | note |", "|---|---|---|---|"]
    for step in check.steps:
        note = step.get("reason") or step.get("expectation") or ""
        if step["status"] not in ("ok", "skipped") and not note:
            note = _tail(check.work / step.get("log", "-"))[:200]
        lines.append(f"| {step['step']} | {step['status']} | {step['seconds']} | {note} |")
    lines += ["", "## Reference kernel and torch SDPA (TFLOP/s; each call's own time, L2 flushed)", ""]
    if bench_rows:
        lines += ["| dtype | D | causal | N | reference | do_bench ref | SDPA flash | SDPA cuDNN | ref / flash |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for row in bench_rows:
            lines.append(_bench_line(row))
    else:
        lines.append("not measured (see the steps)")
    lines += ["", "## Timing protocol: the reference against itself (repeatability)", ""]
    if repeat_runs:
        lines += ["| shape | seed | ratio | 95% interval | verdict | rounds | stopped by | calls/block | verified "
                  "| s |", "|---|---|---|---|---|---|---|---|---|---|"]
        for run in repeat_runs:
            lines.append(f"| {run['case']} | {run['seed']} | {run['ratio']:.4f} | {run['low']:.4f}–{run['high']:.4f} | "
                         f"{run['verdict']} | {run['rounds']} | {run['stopped_by']} | {run['calls']} | "
                         f"{run['verified']} | {run['seconds']:.1f} |")
        ratios = [run["ratio"] for run in repeat_runs]
        bias = statistics.fmean(ratios) - 1
        spread = statistics.stdev(ratios) if len(ratios) > 1 else 0.0
        ties = sum(run["verdict"] == "tie" for run in repeat_runs)
        lines += ["", f"bias (mean ratio − 1): {bias:+.4f}; spread (sd of the ratios): {spread:.4f}; "
                      f"ties: {ties} of {len(repeat_runs)}"]
    else:
        lines.append("not measured (see the steps)")
    lines += ["", "## assignment3 graded (hidden suite, COURSE_KERNELS_MAX_CONFIGS=2)", ""]
    for result in grading:
        if "tasks" not in result:
            lines.append(f"- {result['name']}: no result (see the steps)")
            continue
        tasks = ", ".join(f"{task} {t['score']:g}/{t['max']:g}" + (f" ({t['pending']} pending)" if t["pending"] else "")
                          for task, t in result["tasks"].items())
        lines.append(f"- {result['name']}: {result['score']:g} points at sandbox level "
                     f"{result.get('sandbox_level')}; {tasks}")
        for row in result["timing"]:
            points = "pending" if row["pending"] else f"{row['score']:g}/{row['max']:g}"
            lines.append(f"  - {row['name'].split('::')[-1]}: {points}: {row['detail'][:240]}")
    lines += ["", "## Calibration: flash_speed's thresholds against the handout's solution", ""]
    reference = next((r for r in grading if r.get("name") == "reference" and "tasks" in r), None)
    lines += calibration(reference["ratios"] if reference else {}, _speed_thresholds())
    return "\n".join(lines) + "\n"


def check_all(out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="gpu-check-"))
    check = Check(work)
    py = sys.executable
    env_text = subprocess.run(
        [py, "-c", "import json, torch, platform; from grader.harness.timing import environment; "
                   "print(json.dumps(environment(), indent=1))"],
        cwd=ROOT, capture_output=True, text=True, timeout=120).stdout
    (work / "environment.json").write_text(env_text)
    setup_log = Path(os.environ.get("GPU_CHECK_SETUP_LOG", "/nonexistent"))
    if setup_log.is_file():
        shutil.copy(setup_log, work / "setup.log")
    smi_before = _smi(check, "before")
    sandbox = check.run("sandbox", [py, "-m", "grader.cli", "sandbox"], 180)
    sandbox_text = (work / "sandbox.log").read_text() if sandbox else ""
    if check.gpu and "✗ cuda:" in sandbox_text:  # CUDA fails with the worker's own device files alone:
        retry = check.run("sandbox_whole_dev", [py, "-m", "grader.cli", "sandbox"], 180,
                          env={"GRADE_GPU_DEVICES": "all"})  # try the host's whole /dev, and say so
        retried = (work / "sandbox_whole_dev.log").read_text() if retry else ""
        if "✓ cuda:" in retried:
            os.environ["GRADE_GPU_DEVICES"] = "all"
            retry["expectation"] = "CUDA works only with the whole /dev: the rest of the check ran with it"
        sandbox_text += "\n(with GRADE_GPU_DEVICES=all)\n" + retried
    level_ok = bool(sandbox) and sandbox["status"] == "ok"
    bench_json, repeat_json = work / "bench.json", work / "repeatability.json"
    check.run("bench", [py, str(Path(__file__).resolve()), "bench", str(bench_json)], 150, needs_gpu=True)
    check.run("repeatability", [py, str(Path(__file__).resolve()), "repeatability", str(repeat_json)], 90,
              needs_gpu=True)
    try:
        grading = _grading(check, level_ok)
    except Exception as exc:  # the summary must still be written
        check.steps.append({"step": "grading", "status": f"failed: {type(exc).__name__}: {exc}"[:300], "seconds": 0})
        grading = []
    check.run("attacks", [py, "-m", "pytest", "-q", "tests/test_attacks.py", "-m", "gpu", "-p", "no:cacheprovider"],
              120, needs_gpu=True)
    check.run("kernel_tests", [py, "-m", "pytest", "-q", "tests/test_kernels.py", "tests/test_timing.py",
                               "-m", "gpu or not gpu", "-p", "no:cacheprovider"], 240,
              env={"COURSE_KERNELS_MAX_CONFIGS": "2", "PYTHONDONTWRITEBYTECODE": "1"})
    smi_after = _smi(check, "after")
    load = lambda path: json.loads(path.read_text()) if path.exists() else []
    summary = _summary(check, env_text, smi_before, smi_after, sandbox_text, grading, load(bench_json),
                       load(repeat_json))
    (work / "summary.md").write_text(summary)
    (work / "steps.json").write_text(json.dumps(check.steps, indent=1))
    for leftover in ("submissions", "gradebook.sqlite"):  # sources are in the repository; keep the archive small
        target = work / leftover
        if target.is_dir():
            shutil.rmtree(target, ignore_errors=True)
        elif target.exists():
            target.unlink()
    with tarfile.open(out / "gpu-check.tar.gz", "w:gz") as archive:
        archive.add(work, arcname="gpu-check")
    (out / "summary.md").write_text(summary)
    shutil.rmtree(work, ignore_errors=True)
    print(summary)
    print(f"gpu_check: {out / 'summary.md'} and {out / 'gpu-check.tar.gz'}")
    return 0


def main(argv: list[str]) -> int:
    if str(ROOT) not in sys.path:  # course_kernels/ is never installed: it is read from the checkout
        sys.path.insert(0, str(ROOT))
    if len(argv) >= 2 and argv[0] == "bench":
        bench(Path(argv[1]))
        return 0
    if len(argv) >= 2 and argv[0] == "repeatability":
        repeatability(Path(argv[1]))
        return 0
    return check_all(Path(argv[0]) if argv else Path(os.environ.get("OUT") or "gpu-check-out"))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
