"""Device properties by hipDeviceProp_t's names, and how host threads wait for a device (hipSetDeviceFlags)."""

from __future__ import annotations

import pytest

import gpugraph as gg


def test_every_property_is_given(device):
    properties = device.properties
    assert set(properties) == set(gg.PROPERTIES)
    assert properties is device.properties  # (read once)
    assert properties["name"] == device.name
    assert properties["warpSize"] == 32 and properties["maxThreadsPerBlock"] == 1024
    assert len(properties["maxThreadsDim"]) == len(properties["maxGridSize"]) == 3
    assert properties["totalGlobalMem"] > 0 and properties["multiProcessorCount"] > 0
    assert properties["asyncEngineCount"] >= 1 and properties["concurrentKernels"] == 1
    assert properties["canMapHostMemory"] == 1 and properties["unifiedAddressing"] == 1
    assert (properties["major"], properties["minor"]) >= (8, 0)
    with pytest.raises(TypeError):
        properties["warpSize"] = 64  # type: ignore[index]


@pytest.mark.gpu
def test_cuda_properties_are_the_drivers(gpu_device):
    """Checked against what cuda-bindings' runtime says of the same device."""
    from cuda.bindings import runtime

    err, prop = runtime.cudaGetDeviceProperties(gpu_device.index)
    assert not err
    properties = gpu_device.properties
    for name in ("totalGlobalMem", "multiProcessorCount", "maxThreadsPerMultiProcessor", "asyncEngineCount",
                 "concurrentKernels", "major", "minor", "l2CacheSize", "warpSize", "sharedMemPerBlock",
                 "pciBusID", "memoryBusWidth", "managedMemory", "pageableMemoryAccess"):
        assert properties[name] == getattr(prop, name), name
    assert properties["maxGridSize"] == tuple(prop.maxGridSize)


def test_set_schedule_is_kept(device):
    before = device.schedule
    assert before in gg.SCHEDULES
    try:
        for schedule in ("blocking_sync", "spin", "yield", "auto"):
            device.set_schedule(schedule)
            assert device.schedule == schedule
            stream = device.stream()
            stream.memset(device.zeros(4), 1.0)
            device.synchronize()  # (waits in that way)
    finally:
        device.set_schedule(before)
    with pytest.raises(ValueError, match=r"^set_schedule: expected one of 'auto', 'spin', 'yield', 'blocking_sync', "
                                         r"got 'block'$"):
        device.set_schedule("block")
    assert device.schedule == before
