"""The CUDA backend, on NVIDIA's cuda-bindings (driver API; every call used has a HIP twin).

Imported lazily: gpugraph and its CPU backend work where neither cuda-bindings nor a driver exists.
"""

from __future__ import annotations

from ..._errors import BackendUnavailableError

# What the backend needs from the package index: pyproject's `cuda` extra lists the same (a test checks).
# The code calls the driver API with CUDA 13's signatures (edge data in cuGraphAddDependencies,
# cuGraphGetEdges, cuStreamGetCaptureInfo), which cuda-bindings 12 lacks; NVRTC compiles the kernels.
REQUIREMENTS = ("cuda-bindings>=13,<14", "cuda-toolkit[nvrtc,cudart,cccl]==13.*")
SUPPORTED_MAJOR = 13
_QUOTED = " ".join(f'"{r}"' for r in REQUIREMENTS)
INSTALL = f'from a gpugraph checkout with `pip install ".[cuda]"`, or anywhere with `pip install {_QUOTED}`'


def create_backend() -> object:
    """Load the CUDA backend, or raise BackendUnavailableError saying exactly what is missing."""
    try:
        import cuda.bindings
        from cuda.bindings import driver, nvrtc
    except ImportError as exc:
        raise BackendUnavailableError(
            f"cuda: the package cuda-bindings is not importable ({exc}); install it {INSTALL} "
            f"(it also needs an NVIDIA driver and GPU)") from None
    version = str(getattr(cuda.bindings, "__version__", ""))
    major = version.partition(".")[0]
    if major.isdigit() and int(major) != SUPPORTED_MAJOR:
        raise BackendUnavailableError(f"cuda: gpugraph needs cuda-bindings {SUPPORTED_MAJOR}.x, found {version}; "
                                      f"install it {INSTALL}")
    try:
        (err,) = driver.cuInit(0)
    except RuntimeError as exc:  # cuda-bindings raises this when libcuda.so cannot be loaded
        raise BackendUnavailableError(f"cuda: no NVIDIA driver found ({exc}); install the NVIDIA driver "
                                      f"for your GPU") from None
    if err:
        raise BackendUnavailableError(f"cuda: cuInit failed with {err!r}: no usable NVIDIA GPU or driver")
    err, count = driver.cuDeviceGetCount()
    if err or count == 0:
        raise BackendUnavailableError("cuda: the NVIDIA driver reports no GPU on this machine")
    try:
        nvrtc.nvrtcVersion()
    except RuntimeError as exc:  # cuda-bindings raises this (cuda-pathfinder's DynamicLibNotFoundError)
        raise BackendUnavailableError(f"cuda: NVRTC, which compiles the kernels, cannot be loaded ({exc}); "
                                      f"install it {INSTALL}") from None
    from ._backend import CudaBackend
    return CudaBackend(count)
