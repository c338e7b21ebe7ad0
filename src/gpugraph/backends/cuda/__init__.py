"""The CUDA backend, on NVIDIA's cuda-bindings (driver API; every call used has a HIP twin).

Imported lazily: gpugraph and its CPU backend work where neither cuda-bindings nor a driver exists.
"""

from __future__ import annotations

from ..._errors import BackendUnavailableError


def create_backend() -> object:
    """Load the CUDA backend, or raise BackendUnavailableError saying exactly what is missing."""
    try:
        from cuda.bindings import driver
    except ImportError as exc:
        raise BackendUnavailableError(
            f"cuda: the package cuda-bindings is not importable ({exc}); install it with "
            f"`pip install 'gpugraph[cuda]'` (it also needs an NVIDIA driver and GPU)") from None
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
    from ._backend import CudaBackend
    return CudaBackend(count)
