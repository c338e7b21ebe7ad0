"""DeviceLike: what the modules below ``Device`` read of a device.

``gpugraph._device`` imports the modules that make a device's objects (arrays, streams, events, kernels, records),
so those modules cannot import ``Device`` back: they take a device by this protocol, which ``Device`` is the one
class to meet (mypy checks each use against it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self is Python 3.11+


class DeviceLike(Protocol):
    """A gpugraph Device, as the modules below ``gpugraph._device`` use one."""

    backend: str  # the backend's name: "cuda", "hip" or "cpu"
    index: int  # the device's index among the backend's devices

    def __new__(cls, spec: str | None = None) -> Self: ...  # (the device of a spec: Device(spec))
