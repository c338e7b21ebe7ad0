"""Kernel node attributes on the CUDA driver (cuGraphKernelNodeGetAttribute/SetAttribute; HIP:
hipGraphKernelNodeGetAttribute/SetAttribute): gpugraph's KernelAttributes read from and written to a node, and
the device facts their rules need."""

from __future__ import annotations

from typing import Any

from cuda.bindings import driver as cu

from ..._attributes import AccessPolicyWindow, AttributeLimits, KernelAttributes
from ._driver import call
from ._symbols import drv

_ID = cu.CUlaunchAttributeID
_PRIORITY = _ID.CU_LAUNCH_ATTRIBUTE_PRIORITY
_COOPERATIVE = _ID.CU_LAUNCH_ATTRIBUTE_COOPERATIVE
_WINDOW = _ID.CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW
_CLUSTER = _ID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
_DOMAIN = _ID.CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN
_DOMAINS = {"default": cu.CUlaunchMemSyncDomain.CU_LAUNCH_MEM_SYNC_DOMAIN_DEFAULT,
            "remote": cu.CUlaunchMemSyncDomain.CU_LAUNCH_MEM_SYNC_DOMAIN_REMOTE}
_DOMAIN_NAME = {int(value): name for name, value in _DOMAINS.items()}
_PROPERTY = {"normal": cu.CUaccessProperty.CU_ACCESS_PROPERTY_NORMAL,
             "streaming": cu.CUaccessProperty.CU_ACCESS_PROPERTY_STREAMING,
             "persisting": cu.CUaccessProperty.CU_ACCESS_PROPERTY_PERSISTING}
_PROPERTY_NAME = {int(value): name for name, value in _PROPERTY.items()}
_ATTR = cu.CUdevice_attribute


def read_attributes(node: Any) -> KernelAttributes:
    """The attributes of kernel node ``node`` (the driver's defaults read as gpugraph's: no window is None, and
    cluster dims (0, 0, 0) are (1, 1, 1))."""
    get = drv.graph_kernel_node_get_attribute
    # (The values are kept while their fields are read: a field is a view into its value's memory.)
    window_value, cluster_value = call(get, node, _WINDOW), call(get, node, _CLUSTER)
    window, cluster = window_value.accessPolicyWindow, cluster_value.clusterDim
    dims = (cluster.x, cluster.y, cluster.z)
    return KernelAttributes(
        priority=call(get, node, _PRIORITY).priority,
        cooperative=bool(call(get, node, _COOPERATIVE).cooperative),
        access_policy_window=None if not window.num_bytes else AccessPolicyWindow(
            int(window.base_ptr), window.num_bytes, window.hitRatio, _PROPERTY_NAME[int(window.hitProp)],
            _PROPERTY_NAME[int(window.missProp)]),
        cluster_dims=(1, 1, 1) if dims == (0, 0, 0) else dims,
        mem_sync_domain=_DOMAIN_NAME[int(call(get, node, _DOMAIN).memSyncDomain)])


def _value(name: str, attributes: KernelAttributes) -> tuple[Any, Any]:
    """The driver's attribute id and value for attribute ``name`` of ``attributes``."""
    value = cu.CUkernelNodeAttrValue()
    if name == "priority":
        value.priority = attributes.priority
        return _PRIORITY, value
    if name == "cooperative":
        value.cooperative = int(attributes.cooperative)
        return _COOPERATIVE, value
    if name == "cluster_dims":
        value.clusterDim.x, value.clusterDim.y, value.clusterDim.z = attributes.cluster_dims
        return _CLUSTER, value
    if name == "mem_sync_domain":
        value.memSyncDomain = _DOMAINS[attributes.mem_sync_domain]
        return _DOMAIN, value
    window, target = attributes.access_policy_window, value.accessPolicyWindow
    if window is not None:  # (None: the driver's no-window, all zeros)
        target.base_ptr, target.num_bytes, target.hitRatio = window.base, window.nbytes, window.hit_ratio
        target.hitProp, target.missProp = _PROPERTY[window.hit], _PROPERTY[window.miss]
    return _WINDOW, value


_NAMES = ("priority", "cooperative", "access_policy_window", "cluster_dims", "mem_sync_domain")


def write_attributes(node: Any, new: KernelAttributes, old: KernelAttributes) -> None:
    """Give kernel node ``node`` the attributes ``new`` where they differ from ``old`` (its own): all of them, or
    (a refusal, an interrupt) none: those set are set back to ``old``'s."""
    done: list[str] = []
    try:
        for name in _NAMES:
            if getattr(new, name) != getattr(old, name):
                call(drv.graph_kernel_node_set_attribute, node, *_value(name, new))
                done.append(name)
    except BaseException:
        for name in reversed(done):
            call(drv.graph_kernel_node_set_attribute, node, *_value(name, old))
        raise


def limits(device: Any) -> AttributeLimits:
    """What device ``device`` (a CUdevice, its context current) allows of kernel attributes."""
    least, greatest = call(drv.ctx_get_stream_priority_range)
    return AttributeLimits(
        (least, greatest),
        call(drv.device_get_attribute, _ATTR.CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE, device),
        bool(call(drv.device_get_attribute, _ATTR.CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH, device)),
        bool(call(drv.device_get_attribute, _ATTR.CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, device)))


def cooperative_blocks(function: Any, device: Any, threads: int, shared_mem: int) -> int:
    """The most blocks of ``threads`` threads and ``shared_mem`` bytes of dynamic shared memory of CUfunction
    ``function`` resident on ``device`` at once: what a cooperative launch may have (cuLaunchCooperativeKernel's
    rule: blocks per multiprocessor times multiprocessors)."""
    per_sm = call(drv.occupancy_max_active_blocks_per_multiprocessor, function, threads, shared_mem)
    return per_sm * call(drv.device_get_attribute, _ATTR.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device)
