"""A CUDA device's properties (``Device.properties``, by hipDeviceProp_t's names) and its host threads' way of waiting
(``Device.set_schedule``: the primary context's scheduling flags)."""

from __future__ import annotations

from typing import Any

from cuda.bindings import driver as cu

from ._driver import call
from ._symbols import drv

_ATTR = cu.CUdevice_attribute

# gpugraph._properties.PROPERTIES' names -> the driver's attribute (CU_DEVICE_ATTRIBUTE_...), or three for an x, y, z.
_ATTRIBUTES: dict[str, str | tuple[str, str, str]] = {
    "sharedMemPerBlock": "MAX_SHARED_MEMORY_PER_BLOCK",
    "sharedMemPerMultiprocessor": "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR",
    "regsPerBlock": "MAX_REGISTERS_PER_BLOCK",
    "regsPerMultiprocessor": "MAX_REGISTERS_PER_MULTIPROCESSOR",
    "warpSize": "WARP_SIZE",
    "maxThreadsPerBlock": "MAX_THREADS_PER_BLOCK",
    "maxThreadsDim": ("MAX_BLOCK_DIM_X", "MAX_BLOCK_DIM_Y", "MAX_BLOCK_DIM_Z"),
    "maxGridSize": ("MAX_GRID_DIM_X", "MAX_GRID_DIM_Y", "MAX_GRID_DIM_Z"),
    "maxThreadsPerMultiProcessor": "MAX_THREADS_PER_MULTIPROCESSOR",
    "multiProcessorCount": "MULTIPROCESSOR_COUNT",
    "clockRate": "CLOCK_RATE",
    "memoryClockRate": "MEMORY_CLOCK_RATE",
    "memoryBusWidth": "GLOBAL_MEMORY_BUS_WIDTH",
    "l2CacheSize": "L2_CACHE_SIZE",
    "totalConstMem": "TOTAL_CONSTANT_MEMORY",
    "major": "COMPUTE_CAPABILITY_MAJOR",
    "minor": "COMPUTE_CAPABILITY_MINOR",
    "asyncEngineCount": "ASYNC_ENGINE_COUNT",
    "concurrentKernels": "CONCURRENT_KERNELS",
    "canMapHostMemory": "CAN_MAP_HOST_MEMORY",
    "unifiedAddressing": "UNIFIED_ADDRESSING",
    "pageableMemoryAccess": "PAGEABLE_MEMORY_ACCESS",
    "managedMemory": "MANAGED_MEMORY",
    "cooperativeLaunch": "COOPERATIVE_LAUNCH",
    "streamPrioritiesSupported": "STREAM_PRIORITIES_SUPPORTED",
    "memoryPoolsSupported": "MEMORY_POOLS_SUPPORTED",
    "integrated": "INTEGRATED",
    "pciBusID": "PCI_BUS_ID",
    "pciDeviceID": "PCI_DEVICE_ID",
    "pciDomainID": "PCI_DOMAIN_ID",
}

# gpugraph._properties.SCHEDULES -> the primary context's flag (CU_CTX_SCHED_*).
SCHEDULE_FLAGS = {"auto": cu.CUctx_flags.CU_CTX_SCHED_AUTO, "spin": cu.CUctx_flags.CU_CTX_SCHED_SPIN,
                  "yield": cu.CUctx_flags.CU_CTX_SCHED_YIELD,
                  "blocking_sync": cu.CUctx_flags.CU_CTX_SCHED_BLOCKING_SYNC}
_SCHEDULE_MASK = int(cu.CUctx_flags.CU_CTX_SCHED_MASK)


def read_properties(device: Any, name: str) -> dict[str, Any]:
    """Every property of ``device`` (a CUdevice), ``name`` being its name (read elsewhere)."""
    def read(attribute: str) -> int:
        return int(call(drv.device_get_attribute, getattr(_ATTR, "CU_DEVICE_ATTRIBUTE_" + attribute), device))
    properties: dict[str, Any] = {"name": name, "totalGlobalMem": int(call(drv.device_total_mem, device))}
    for key, attribute in _ATTRIBUTES.items():
        properties[key] = read(attribute) if isinstance(attribute, str) else tuple(map(read, attribute))
    return properties


def schedule_of(device: Any) -> str:
    """How host threads wait for ``device``'s primary context (a name of SCHEDULE_FLAGS)."""
    flags, _active = call(drv.device_primary_ctx_get_state, device)
    sched = int(flags) & _SCHEDULE_MASK
    return next(name for name, flag in SCHEDULE_FLAGS.items() if int(flag) == sched)


def set_schedule(device: Any, schedule: str) -> None:
    """Make host threads wait for ``device``'s primary context as ``schedule`` says, keeping its other flags."""
    flags, _active = call(drv.device_primary_ctx_get_state, device)
    call(drv.device_primary_ctx_set_flags, device, (int(flags) & ~_SCHEDULE_MASK) | int(SCHEDULE_FLAGS[schedule]))
