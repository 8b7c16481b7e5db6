#!/usr/bin/env bash
# The CUDA board's checks that need a GPU, in one call on a lent GPU machine (after
# ../shared/gpu/bundle.sh's two parts are installed there): the GPU tests, then the
# planned-against-counted bytes of benchmarks/cuda_memory.py. Logs go to $1 (default
# $OUT, else var/cuda-check); each step has a time limit so the call ends inside its lease.
set -uo pipefail
cd "$(dirname "$0")/.."
logs=${1:-${OUT:-var/cuda-check}}
mkdir -p "$logs"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$logs/gpu.txt"
export PYTHONUNBUFFERED=1
timeout 240 python3 -m pytest -q -p no:cacheprovider -o addopts="" \
  tests/boards/test_cuda_board.py tests/tvm/measure/test_cuda_memory_counter.py 2>&1 \
  | tee "$logs/pytest.log" | tail -n 25
timeout 300 python3 benchmarks/cuda_memory.py --json "$logs/cuda-memory.json" 2>&1 \
  | grep -v -E "Warning|warn\(|__new__" | tee "$logs/benchmark.log" | tail -n 30
