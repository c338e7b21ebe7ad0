#!/usr/bin/env bash
# Download the Vulkan loader's Debian packages (amd64) into .gl/, for a GPU machine without one: carry .gl to it
# and tools/dev/gpu_check.sh unpacks them, so that tests/test_semaphores.py imports a real Vulkan semaphore into CUDA.
# (On a machine whose loader is installed, the tests use it and this is not needed.)
set -euo pipefail
grep -qx "/.gl/" .git/info/exclude 2>/dev/null || echo "/.gl/" >> .git/info/exclude
mkdir -p .gl /tmp/amd64/partial
o=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64)
apt-get "${o[@]}" update > /dev/null
(cd .gl && apt-get "${o[@]}" download libvulkan1 libglvnd0 libglx0 libegl1 libgl1 libopengl0 libgles2)
ls .gl
