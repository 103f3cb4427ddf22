#!/usr/bin/env bash
# Install the grader into the active Python (a virtual environment: README "Two commands").
#   bash scripts/install.sh [EXTRAS]      EXTRAS defaults to "dev" (the test suite's tools); "dev,ray" adds Ray
# Without an NVIDIA GPU, the CPU build of torch comes first (about 1 GB installed, its wheel about
# 200 MB), so that the grader's torch>=2.5 does not pull the CUDA build (about 6 GB with its libraries).
# Where the CPU wheel index cannot be reached, the default index is used instead, saying so in one line.
# Versions the suite is known green with come from constraints.txt (TEST_NEWEST=1: the newest releases).
set -euo pipefail
cd "$(dirname "$0")/.."
extras=${1:-dev}
python=${PYTHON:-python}
cpu_index=https://download.pytorch.org/whl/cpu
constraints=(-c constraints.txt)
[ "${TEST_NEWEST:-0}" = 1 ] && constraints=()

has_torch() { "$python" -c "import torch" >/dev/null 2>&1; }
reachable() {  # $1: a URL; answers within 10 s (pip's own retries take minutes)
  "$python" - "$1" <<'PY'
import sys, urllib.request
try:
    urllib.request.urlopen(sys.argv[1], timeout=10).close()
except Exception:
    sys.exit(1)
PY
}

if has_torch; then
  echo "install: torch $("$python" -c 'import torch; print(torch.__version__)') is already installed: kept"
elif nvidia-smi >/dev/null 2>&1; then
  echo "install: an NVIDIA GPU is here: torch's default (CUDA) build comes with the grader (about 6 GB)"
elif reachable "$cpu_index/torch/"; then
  echo "install: no NVIDIA GPU: torch's CPU build first, from $cpu_index (a wheel of about 200 MB)"
  "$python" -m pip install torch --index-url "$cpu_index"
else
  echo "install: $cpu_index cannot be reached: torch comes from the default index instead" \
       "(on Linux its CUDA build, about 6 GB; it runs on the CPU too)"
fi
"$python" -m pip install "${constraints[@]}" -e ".[$extras]"
