#!/usr/bin/env bash
# Downloads into .whl/ (ignored by git; carried to the GPU machine, which cannot reach a package index) the wheels
# gpu_check.sh installs there: a Cython that compiles the core modules right (3.3.1 or newer), NVIDIA's CUDA runtime
# and profiler headers as new as the machine's cuda-bindings (for the compiled CUDA path), and cupti-python (for
# gg.timeline on CUDA; the 13.0 series, as the machines' driver (580) is CUDA 13.0's: the one measured there). For the
# GPU machine's Python (3.12, x86-64 Linux): PYTHON_VERSION overrides it.
set -euo pipefail
cd "$(dirname "$0")/../.."
python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version "${PYTHON_VERSION:-3.12}" \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 -d .whl \
  "cython>=3.3.1" "nvidia-cuda-runtime>=13.3,<14" "nvidia-cuda-profiler-api>=13.3,<14" "cupti-python==13.0.*"
ls .whl
