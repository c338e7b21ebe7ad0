"""DeviceLike: what the modules below ``Device`` read of a device.

``gpugraph._device`` imports the modules that make a device's objects (arrays, streams, events, kernels, records),
so those modules cannot import ``Device`` back: they take a device by this protocol, which ``Device`` is the one
class to meet (mypy checks each use against it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self is Python 3.11+

    from ._attributes import AttributeLimits
    from .backends._protocol import Backend


class DeviceLike(Protocol):
    """A gpugraph Device, as the modules below ``gpugraph._device`` use one."""

    backend: str  # the backend's name: "cuda", "hip" or "cpu"
    index: int  # the device's index among the backend's devices
    _backend: Backend

    def __new__(cls, spec: str | None = None) -> Self: ...  # (the device of a spec: Device(spec))

    def _synchronize(self, api: str) -> None:
        """Wait for all work on the device (``api`` names the call, for its refusals)."""

    def _attribute_limits(self) -> AttributeLimits:
        """What the device allows of kernel node attributes."""

    def _reach(self, value: Any, what: str) -> None:
        """Let work on the device use ``value``, an Array of another device, or refuse it."""
