"""Fixtures shared by the behaviour tests: every test that takes ``device`` runs once per available backend.

``device`` is a ``gg.Device`` of one backend (ids are backend names), ``backend`` its name and ``stream``
a fresh stream on it; ``pair`` is two devices of one backend. Tests marked ``gpu`` are skipped, with the
reason, where no GPU backend is present.
"""

from __future__ import annotations

import os

import pytest

import gpugraph as gg
import gpugraph.backends
import kernels as K
from gpugraph._placement import load_kernel

BACKENDS = gg.available_backends()
GPU_BACKENDS = [name for name in BACKENDS if name != "cpu"]


def _why_no_gpu() -> str:
    reasons = []
    for name in ("cuda", "hip"):
        try:
            gg.Device(name)
        except gg.BackendUnavailableError as exc:
            reasons.append(str(exc).splitlines()[0])
    return "needs a GPU backend; none is available here (" + "; ".join(reasons) + ")"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip ``@pytest.mark.gpu`` tests, saying why, when only the CPU backend is present."""
    if GPU_BACKENDS:
        return
    skip = pytest.mark.skip(reason=_why_no_gpu())
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def _shared_kernels_loaded() -> None:
    """Load tests/kernels.py's kernels on every backend before any test. On CUDA, loading a module waits for
    the work the device has queued; a test that blocks a stream with a host function would otherwise stall
    there (until its gate times out) whenever it happens to be the first to use a kernel."""
    for name in BACKENDS:
        device = gg.Device(name)
        for kernel in vars(K).values():
            if isinstance(kernel, gg.Kernel):
                load_kernel(device, kernel)


@pytest.fixture(params=BACKENDS, ids=BACKENDS)
def device(request: pytest.FixtureRequest) -> gg.Device:
    """The device of one available backend."""
    return gg.Device(request.param)


@pytest.fixture(params=BACKENDS, ids=BACKENDS)
def pair(request: pytest.FixtureRequest) -> tuple[gg.Device, gg.Device]:
    """Two devices of one backend, its first and its last (skipped where the backend has one)."""
    count = gg.backends.get_backend(request.param).device_count()
    if count < 2:
        pytest.skip(f"{request.param} has {count} device here; these tests need two")
    return gg.Device(f"{request.param}:0"), gg.Device(f"{request.param}:{count - 1}")


@pytest.fixture
def backend(device: gg.Device) -> str:
    """The backend name of ``device`` ("cpu", "cuda", ...)."""
    return device.backend


@pytest.fixture
def gpu_device() -> gg.Device:
    """A device of the first GPU backend (tests using it are marked ``gpu``)."""
    return gg.Device(GPU_BACKENDS[0])


@pytest.fixture
def stream(device: gg.Device):
    """A fresh stream on ``device``; its work must have finished cleanly by the end of the test."""
    s = device.stream()
    yield s
    s.synchronize()


@pytest.fixture
def known_bug(request: pytest.FixtureRequest, device: gg.Device):
    """``known_bug("BUG: ...", backends=("cuda",))`` marks this test strict-xfail on those backends only.

    With ``crash=True`` (the bug takes the interpreter down) the test is reported xfailed without running on
    those backends, unless $GPUGRAPH_RUN_KNOWN_CRASHES is set (to reproduce the crash).
    """
    def mark(reason: str, backends: tuple[str, ...] = ("cpu",), crash: bool = False,
             raises: type[BaseException] | tuple[type[BaseException], ...] | None = None) -> None:
        if device.backend not in backends:
            return
        if crash and not os.environ.get("GPUGRAPH_RUN_KNOWN_CRASHES"):
            pytest.xfail(reason)
        request.node.add_marker(pytest.mark.xfail(reason=reason, strict=True, raises=raises))
    return mark
