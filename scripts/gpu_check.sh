#!/usr/bin/env bash
# Every GPU number of the course in one command, on a bare machine with only Python:
#
#   scripts/gpu_check.sh [OUT]        # OUT: $1, else $OUT, else gpu-check-out/
#
# 1. installs what is missing, itself: the project (python3 -m pip install -e .; without a network,
#    the checkout on PYTHONPATH), pyseccomp, and bubblewrap where apt-get works (as root); whatever
#    cannot be installed is logged, and the summary says at which sandbox level it measured;
# 2. runs scripts/gpu_check.py: nvidia-smi before and after, the sandbox level, the TFLOP/s table
#    (reference kernel, SDPA flash and cuDNN), the timing protocol's repeatability, assignment 3's
#    hidden suite on the reference, a slow and a wrong kernel, the GPU attack tests, the kernel tests;
# 3. leaves exactly two files in OUT: gpu-check.tar.gz (every log and report) and summary.md.
#
# Under 8 minutes on a GPU (GPU_CHECK_BUDGET_S, default 440 s, bounds the steps); without a GPU the
# same command runs every step that needs none, in minutes, and names each one it skipped.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:-${OUT:-gpu-check-out}}"
py="${PYTHON:-python3}"
mkdir -p "$out"
setup_log="$(mktemp /tmp/gpu-check-setup.XXXXXX)"
unset TRITON_INTERPRET  # the check decides per step; a GPU run must compile
{
  echo "python: $(command -v "$py") $("$py" --version 2>&1)"
  if "$py" -c 'import grader, click, jinja2, torch, triton' 2>/dev/null; then
    echo "project: importable already"
  else
    echo "project: installing (python3 -m pip install -e .)"
    timeout 300 "$py" -m pip install --quiet -e . \
      || timeout 120 "$py" -m pip install --quiet --no-deps --no-build-isolation -e . \
      || echo "project: pip could not install it (no network?); using the checkout on PYTHONPATH"
  fi
  if "$py" -c 'from grader.sandbox.seccomp_filter import _bindings; import sys; sys.exit(_bindings() is None)' \
      2>/dev/null; then
    echo "seccomp bindings: present"
  else
    timeout 120 "$py" -m pip install --quiet pyseccomp || echo "seccomp bindings: pyseccomp could not be installed"
  fi
  if command -v bwrap > /dev/null; then
    echo "bubblewrap: $(bwrap --version 2>&1)"
  elif command -v apt-get > /dev/null && [ "$(id -u)" = 0 ]; then
    echo "bubblewrap: installing with apt-get"
    (timeout 120 apt-get update -qq && timeout 120 apt-get install -y -qq bubblewrap) \
      || echo "bubblewrap: apt-get could not install it"
  else
    echo "bubblewrap: not installed and apt-get unusable here (not root, or no apt-get)"
  fi
  command -v nvidia-smi > /dev/null && nvidia-smi -L || echo "nvidia-smi: none"
} > "$setup_log" 2>&1
cat "$setup_log"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
GPU_CHECK_SETUP_LOG="$setup_log" "$py" scripts/gpu_check.py "$out"
status=$?
rm -f "$setup_log"
exit $status
