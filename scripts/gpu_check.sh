#!/usr/bin/env bash
# GPU check for assignment 3, on a machine with a CUDA GPU:
#   1. the Triton kernels' tests, natively (bf16 included)
#   2. the timing harness's tests
#   3. the TFLOP/s benchmark (our kernel, torch SDPA, naive)
#   4. `grade submit assignment3` on the reference and on a slow (16x16-tile) submission,
#      written by scripts/make_slow_kernel.py
#   5. the sandbox on a GPU worker (`grade sandbox`: every layer with CUDA in use) and the timing
#      protocol's attacks timed on the GPU (patched clocks, memoised and replayed outputs)
# then one summary table. Output folder: $1 (default: gpu-check-out/).
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:-gpu-check-out}"
mkdir -p "$out"
if ! python -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  echo "gpu_check: no CUDA device here; nothing to check (the CPU path is covered by the test suite)" >&2
  exit 2
fi
unset TRITON_INTERPRET
python -m pytest tests/test_kernels.py tests/test_timing.py -q -m "gpu or not gpu" 2>&1 | tee "$out/kernel-tests.log"
python benchmarks/bench_flash.py 2>&1 | tee "$out/bench-flash.txt"
grade submit assignment3 --workspace reference/assignment3 --student reference --no-record \
  --json "$out/reference.json" --html "$out/reference.html" > "$out/reference.txt" 2>&1
python scripts/make_slow_kernel.py "$out/slow-kernel" > /dev/null
grade submit assignment3 --workspace "$out/slow-kernel" --student slow --no-record \
  --json "$out/slow.json" --html "$out/slow.html" > "$out/slow.txt" 2>&1
grade sandbox 2>&1 | tee "$out/sandbox.txt"
python -m pytest tests/test_attacks.py -q -k "timing_attack and cuda" -m "gpu or not gpu" 2>&1 | tee "$out/timing-attacks.log"
python scripts/gpu_summary.py "$out/reference.json" "$out/slow.json" | tee "$out/summary.txt"
