"""The CUDA backend on NVIDIA's cuda-bindings (work in progress: see the CUDA backend issue)."""

from __future__ import annotations

from .._errors import BackendUnavailableError


def create_backend() -> object:
    """Load the CUDA backend, or say exactly what is missing."""
    try:
        from cuda.bindings import driver  # noqa: F401
    except ImportError:
        raise BackendUnavailableError(
            "cuda: the package cuda-bindings is not installed; install it with "
            "`pip install 'gpugraph[cuda]'` (it also needs an NVIDIA driver and GPU)") from None
    raise BackendUnavailableError("cuda: the CUDA backend is not implemented in this build yet")
