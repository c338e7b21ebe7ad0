"""Kernel node attributes (cudaGraphKernelNodeSetAttribute, hipGraphKernelNodeSetAttribute): a kernel node's
priority, cooperative launch, L2 access policy window, thread-block cluster dimensions and memory synchronization
domain, and the rules every backend applies to them.

A backend keeps each node's attributes (the CUDA driver does: clones, captures and instantiates carry them). The
front end checks every value before a backend sees it; the rules that tie attributes to a launch shape
(``launch_refusal``) are checked again wherever a shape changes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import numpy as np

from ._device_like import DeviceLike
from ._scalars import as_bool, as_int, as_real, describe
from .backends import get_backend

# The L2 cache properties of an access policy window's hits and misses (CUaccessProperty).
ACCESS_PROPERTIES = ("normal", "streaming", "persisting")
# The memory synchronization domains a kernel's fences may take (CUlaunchMemSyncDomain).
MEM_SYNC_DOMAINS = ("default", "remote")
# The most blocks a cluster may have: CUDA's portable cluster size (the driver refuses more unless the kernel is
# built for non-portable sizes, which gpugraph's kernels are not).
MAX_CLUSTER_BLOCKS = 8


@dataclass(frozen=True)
class AccessPolicyWindow:
    """An L2 access policy window (CUaccessPolicyWindow): of the accesses to ``[base, base + nbytes)``, the
    fraction ``hit_ratio`` get the L2 property ``hit``, the others ``miss``.

    ``base`` is an address, or an Array (its address; ``nbytes`` None then means the whole Array). Properties are
    those of ``ACCESS_PROPERTIES``; ``miss`` may not be "persisting" (CUDA's rule).
    """

    base: Any
    nbytes: int | None = None
    hit_ratio: float = 1.0
    hit: str = "persisting"
    miss: str = "streaming"


@dataclass(frozen=True)
class KernelAttributes:
    """A kernel node's attributes (``Node.attributes``; ``Graph.set_attributes`` changes them).

    Attributes:
        priority: The node's priority, used where the executable graph was instantiated with
            ``use_node_priority=True``: within ``Device.priority_range`` (lower numbers run first), to which one
            outside it is clamped, as CUDA does.
        cooperative: Whether all the node's blocks are resident at once, as ``cudaLaunchCooperativeKernel``
            launches (grid-wide synchronisation); its grid must then fit on the device at once.
        access_policy_window: The L2 access policy window of the node's accesses, or None.
        cluster_dims: The node's thread-block cluster dimensions; (1, 1, 1) for no clusters. Each divides the
            grid's, and they hold at most ``MAX_CLUSTER_BLOCKS`` blocks.
        mem_sync_domain: The memory synchronization domain of the node's fences, one of ``MEM_SYNC_DOMAINS``:
            "remote" for a kernel whose memory fences need order only what other devices see (a communication
            kernel), so that they do not wait for this device's other kernels' writes.
    """

    priority: int = 0
    cooperative: bool = False
    access_policy_window: AccessPolicyWindow | None = None
    cluster_dims: tuple[int, int, int] = (1, 1, 1)
    mem_sync_domain: str = "default"


DEFAULT_ATTRIBUTES = KernelAttributes()


class AttributeLimits(NamedTuple):
    """What a device allows of kernel attributes (its backend says)."""

    priorities: tuple[int, int]  # (least, greatest): CUDA's cuCtxGetStreamPriorityRange, e.g. (0, -5)
    max_window_bytes: int  # CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE
    clusters: bool  # CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH
    cooperative: bool  # CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH

    def clamped_priority(self, priority: int) -> int:
        """``priority`` within ``priorities``, as CUDA clamps a stream's (cuStreamCreateWithPriority) and a kernel
        node's (measured: 100 read back as 0)."""
        least, greatest = self.priorities
        return min(max(priority, greatest), least)


# What each device allows, by device, read from its backend when first needed (device_limits).
_limits: dict[DeviceLike, AttributeLimits] = {}


def device_limits(device: DeviceLike) -> AttributeLimits:
    """What ``device`` allows of kernel node attributes (read from its backend once)."""
    limits = _limits.get(device)
    if limits is None:
        limits = _limits[device] = get_backend(device.backend).kernel_attribute_limits(device.index)
    return limits


class AttributeRefusal(ValueError):
    """A backend's refusal of a launch shape that a kernel node's attributes do not allow (``launch_refusal``'s
    rules, checked where the front end cannot: an executable graph's node); the front end names the node."""


_KEEP: Any = object()  # (set_attributes' default: the attribute stays as it is)


def _checked_priority(value: Any, limits: AttributeLimits, what: str) -> int:
    number = as_int(value)
    if number is None:
        raise TypeError(f"{what}(priority): expected an int, got {type(value).__name__}")
    return limits.clamped_priority(number)


def _checked_cooperative(value: Any, limits: AttributeLimits, what: str) -> bool:
    flag = as_bool(value)
    if flag is None:
        raise TypeError(f"{what}(cooperative): expected a bool, got {describe(value)}")
    if flag and not limits.cooperative:
        raise ValueError(f"{what}(cooperative): this device cannot launch cooperative kernels")
    return flag


def _checked_window(value: Any, limits: AttributeLimits, what: str) -> AccessPolicyWindow | None:
    if value is None:
        return None
    if not isinstance(value, AccessPolicyWindow):
        raise TypeError(f"{what}(access_policy_window): expected an AccessPolicyWindow or None, "
                        f"got {type(value).__name__}")
    base, given = value.base, value.nbytes
    nbytes = as_int(given)
    if given is not None and nbytes is None:
        raise TypeError(f"{what}(access_policy_window): nbytes must be an int, got {describe(given)}")
    if hasattr(base, "ptr") and hasattr(base, "nbytes"):  # an Array: its address (and its size, by default)
        if nbytes is None:
            nbytes = base.nbytes
        elif nbytes > base.nbytes:
            raise ValueError(f"{what}(access_policy_window): the window's {nbytes} bytes pass the end of its base "
                             f"{base!r} ({base.nbytes} bytes)")
        address = base.ptr
    else:
        address = as_int(base)
        if address is None or address <= 0:
            raise TypeError(f"{what}(access_policy_window): base must be an Array or a non-zero address, got "
                            f"{base!r}")
    if nbytes is None:
        raise ValueError(f"{what}(access_policy_window): nbytes is needed with an address for base")
    if not 0 < nbytes <= limits.max_window_bytes:
        raise ValueError(f"{what}(access_policy_window): nbytes must be from 1 to this device's largest window, "
                         f"{limits.max_window_bytes} bytes; got {nbytes}")
    ratio = as_real(value.hit_ratio)
    if ratio is None:
        raise TypeError(f"{what}(access_policy_window): hit_ratio must be a number from 0 to 1, got "
                        f"{describe(value.hit_ratio)}")
    if not 0.0 <= ratio <= 1.0:
        raise ValueError(f"{what}(access_policy_window): hit_ratio must be a number from 0 to 1, got {ratio!r}")
    for side in ("hit", "miss"):
        prop = getattr(value, side)
        if prop not in ACCESS_PROPERTIES:
            raise ValueError(f"{what}(access_policy_window): {side} must be one of {ACCESS_PROPERTIES}, got {prop!r}")
    if value.miss == "persisting":
        raise ValueError(f"{what}(access_policy_window): miss may be 'normal' or 'streaming', not 'persisting'")
    # (As the driver keeps it, a float: every backend reads back the same number.)
    return AccessPolicyWindow(address, nbytes, float(np.float32(ratio)), value.hit, value.miss)


def _checked_cluster(value: Any, limits: AttributeLimits, what: str) -> tuple[int, int, int]:
    given = value if isinstance(value, tuple) else (value,)
    numbers = [n for n in map(as_int, given) if n is not None]
    if not 1 <= len(given) <= 3 or len(numbers) != len(given):
        raise TypeError(f"{what}(cluster_dims): expected an int or a tuple of 1 to 3 ints, got {value!r}")
    dims: tuple[int, int, int] = (*numbers, 1, 1)[:3]  # type: ignore[assignment]
    if min(dims) < 1:
        raise ValueError(f"{what}(cluster_dims): each dimension must be at least 1, got {dims}")
    if math.prod(dims) > MAX_CLUSTER_BLOCKS:
        raise ValueError(f"{what}(cluster_dims): a cluster holds at most {MAX_CLUSTER_BLOCKS} blocks, got {dims} "
                         f"({math.prod(dims)})")
    if dims != (1, 1, 1) and not limits.clusters:
        raise ValueError(f"{what}(cluster_dims): this device has no thread-block clusters; only (1, 1, 1) applies")
    return dims


def _checked_domain(value: Any, limits: AttributeLimits, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what}(mem_sync_domain): expected one of {MEM_SYNC_DOMAINS}, got {value!r}")
    if value not in MEM_SYNC_DOMAINS:
        raise ValueError(f"{what}(mem_sync_domain): expected one of {MEM_SYNC_DOMAINS}, got {value!r}")
    return value


_CHECKS: dict[str, Callable[[Any, AttributeLimits, str], Any]] = {
    "priority": _checked_priority, "cooperative": _checked_cooperative,
    "access_policy_window": _checked_window, "cluster_dims": _checked_cluster,
    "mem_sync_domain": _checked_domain}


def attributes_with(old: KernelAttributes, changes: dict[str, Any], limits: AttributeLimits,
                    what: str) -> KernelAttributes:
    """``old`` with ``changes`` (attribute name -> value given; ``_KEEP`` keeps one), each checked."""
    given = {name: _CHECKS[name](value, limits, what) for name, value in changes.items() if value is not _KEEP}
    return replace(old, **given) if given else old


def launch_refusal(attributes: KernelAttributes, grid: tuple[int, int, int], block: tuple[int, int, int],
                   cooperative_blocks: Callable[[], int]) -> str | None:
    """Why a kernel node of ``attributes`` cannot launch ``grid`` blocks of ``block`` threads, or None.
    ``cooperative_blocks``: the most blocks of that shape the device holds at once (asked only when needed)."""
    cluster = attributes.cluster_dims
    if cluster != (1, 1, 1) and any(g % c for g, c in zip(grid, cluster)):
        return f"its cluster dims {cluster} must divide its grid {grid}"
    if attributes.cooperative:
        limit, blocks = cooperative_blocks(), math.prod(grid)
        if blocks > limit:
            return (f"it is cooperative, so its {blocks} blocks must all be resident at once; this device holds at "
                    f"most {limit} blocks of {math.prod(block)} threads of this kernel")
    return None
