#!/usr/bin/env bash
# The GPU verification run: the whole test suite on every backend, the demo on CUDA, the benchmark
# suite, the driver probes (update rules; capture, memory and kernel rules; threads), a profile of the hot
# paths, and compute-sanitizer memcheck over the CUDA tests (left out by "quick"). Logs go to $OUT
# (or ./gpu-logs).
# Usage: bash tools/dev/gpu_check.sh [quick|suite K/N|memcheck [K/N]]  (quick: all but memcheck; suite K/N: the
# environment and the compiled suite alone over the K-th of N shares of the test files, each failure named (-rfE)
# and the slowest tests listed; memcheck: it alone, over every test file, or over the K-th of N shares of them.
# The suite alone reached 41% in 400 s on an H100 (2026-12-07): where one command may run 10 minutes, run the
# suite as 1/2 and 2/2 before quick; memcheck over all files reached 95% in 10 minutes on an H200 (2026-11-23):
# run it as 1/2 and 2/2.)
# The benchmark's JSON ($OUT/bench.json) renders docs/performance.md's CUDA tables: tools/dev/bench_tables.py.
set -uo pipefail
cd "$(dirname "$0")/../.."  # the repository root: the paths below are relative to it
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
share_of_files() {  # K/N (or nothing: every file) -> files: every N-th test file, from the K-th
  files=(tests)
  [ -n "${1:-}" ] || return 0
  local share=${1%/*} shares=${1#*/} i
  mapfile -t all < <(ls tests/test_*.py | sort)
  files=()
  for i in "${!all[@]}"; do [ $(( i % shares )) -eq $(( share - 1 )) ] && files+=("${all[$i]}"); done
}
export PYTHONPATH=src PYTHONUNBUFFERED=1
# Wheels carried in .whl/ (tools/dev/fetch_wheels.sh: a Cython that compiles the core, NVIDIA's CUDA headers as new as
# cuda-bindings, cupti-python), which the GPU image lacks and cannot fetch, are installed beside the tree.
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-deps --no-index --target /tmp/gpugraph-wheels .whl/*.whl \
    && export PYTHONPATH=/tmp/gpugraph-wheels:src
  [ -f /tmp/gpugraph-wheels/nvidia/cu13/include/cuda.h ] && export CUDA_HOME=/tmp/gpugraph-wheels/nvidia/cu13
fi
# The compiled CUDA path, built in place (setup.py; a cuda.h at least as new as cuda-bindings is needed:
# where the system's is older, set CUDA_HOME to a folder whose include/ has nvidia-cuda-runtime's and
# nvidia-cuda-profiler-api's headers). Then the suite runs on it and again with GPUGRAPH_COMPILED=0.
python3 setup.py build_ext --inplace > "$OUT/build.txt" 2>&1 || echo "gpu_check: building the compiled path failed ($OUT/build.txt)"
# The Vulkan loader, for the external semaphore tests' real Vulkan semaphore: where the machine lacks it, the
# packages tools/dev/fetch_vulkan.sh downloads into .gl/ (carried to the GPU machine) are unpacked here.
if ! ldconfig -p | grep -q libvulkan.so.1 && compgen -G ".gl/*.deb" > /dev/null; then
  for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
fi
for icd in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; do [ -f "$icd" ] && export VK_DRIVER_FILES=$icd; done
{
  date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import sys, numpy; from importlib.metadata import version as v; print('python', sys.version.split()[0], 'numpy', numpy.__version__, 'cuda-bindings', v('cuda-bindings'), 'cupy', v('cupy-cuda13x'), 'torch', v('torch'))"
  python3 -m gpugraph info
} 2>&1 | tee "$OUT/env.txt"
if [ "${1:-}" = suite ]; then
  share_of_files "${2:-}"
  python3 -m pytest -q -p no:cacheprovider --timeout 120 -rfE --durations=20 "${files[@]}" 2>&1 \
    | tee "$OUT/pytest-share-${2/\//-of-}.txt" | tail -40
  exit
fi
if [ "${1:-}" != memcheck ]; then
python3 -m gpugraph demo --backend cuda 2>&1 | tee "$OUT/demo.txt"
python3 -m pytest -q -p no:cacheprovider --timeout 300 -ra 2>&1 | tee "$OUT/pytest.txt" | tail -25
GPUGRAPH_COMPILED=0 python3 -m pytest -q -p no:cacheprovider --timeout 300 -ra 2>&1 | tee "$OUT/pytest-python-path.txt" | tail -3
# The benchmark as docs/performance.md runs it (its GPU workloads and RK4), pinned to one core where there are four.
pin=(); [ "$(nproc)" -ge 4 ] && command -v taskset >/dev/null && pin=(taskset -c 3)
"${pin[@]}" python3 -m gpugraph bench --backend cuda --workload launch --workload graphs --workload manage \
  --workload dynamic --workload solver --workload rk4 --workload memory --workload hot --repeats 7 --json "$OUT/bench.json" 2>&1 \
  | tee "$OUT/bench.txt" | tail -8
{ python3 tools/probes/gpu_probe_update.py; python3 tools/probes/gpu_probe_rules.py; python3 tools/probes/gpu_probe_threads.py 5; } 2>&1 \
  | tee "$OUT/probes.txt"
python3 tools/dev/profile_hot_paths.py > "$OUT/profile.txt" 2>&1; grep -E "^##|^ +[0-9.]+  " "$OUT/profile.txt"
fi
if [ "${1:-}" != quick ] && command -v compute-sanitizer >/dev/null; then
  # The sanitizer serializes work across streams, so tests that need a second stream to run while the
  # first is blocked (marked overlap) cannot pass under it, nor can a child interpreter that exits with work
  # blocked forever (marked blocks_exit: the sanitizer's teardown waits for it), nor a kernel that stops on
  # purpose (marked stops_a_kernel: the sanitizer reports its assert or trap), nor a graph a kernel launches as a
  # sibling (marked sibling_launch: see pyproject's markers); they run in the plain pass. Backtraces are the
  # device's only: the host backtrace the sanitizer saves at each launch holds the Python frames of the call
  # (measured on the H200, 2026-11-24), so objects those frames name outlive their last reference and tests
  # that check an object goes then fail. Rerun one report with --show-backtrace yes to see its launch's host side.
  share_of_files "${2:-}"
  compute-sanitizer --tool memcheck --leak-check no --report-api-errors no --error-exitcode 1 --show-backtrace device \
    python3 -m pytest -q -p no:cacheprovider -rfE -k cuda -m "not overlap and not blocks_exit and not stops_a_kernel and not sibling_launch" "${files[@]}" 2>&1 \
    | tee "$OUT/memcheck.txt" | tail -8
fi
