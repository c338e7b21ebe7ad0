"""The device properties ``Device.properties`` gives, by their names in HIP's hipDeviceProp_t (CUDA's cudaDeviceProp),
and the ways a host thread may wait for a device (``Device.set_schedule``)."""

from __future__ import annotations

# Name -> what it is. Every backend gives each of them (a test checks it); sizes are in bytes, clocks in kHz.
PROPERTIES: dict[str, str] = {
    "name": "the device's name",
    "totalGlobalMem": "device memory, in bytes",
    "sharedMemPerBlock": "shared memory a block may use without opting in to more, in bytes",
    "sharedMemPerMultiprocessor": "shared memory of a multiprocessor, in bytes",
    "regsPerBlock": "32-bit registers a block may use",
    "regsPerMultiprocessor": "32-bit registers of a multiprocessor",
    "warpSize": "threads in a warp",
    "maxThreadsPerBlock": "threads a block may have",
    "maxThreadsDim": "the largest block along x, y and z",
    "maxGridSize": "the largest grid along x, y and z",
    "maxThreadsPerMultiProcessor": "threads resident on a multiprocessor at once",
    "multiProcessorCount": "multiprocessors",
    "clockRate": "the peak clock, in kHz",
    "memoryClockRate": "the peak memory clock, in kHz",
    "memoryBusWidth": "the memory bus width, in bits",
    "l2CacheSize": "the L2 cache, in bytes",
    "totalConstMem": "constant memory, in bytes",
    "major": "compute capability, major",
    "minor": "compute capability, minor",
    "asyncEngineCount": "copy engines: copies that can run while kernels run (2: one each way at once)",
    "concurrentKernels": "1 if kernels of several streams may run at once",
    "canMapHostMemory": "1 if kernels may use page-locked host memory in place (HostRegistration.device_array)",
    "unifiedAddressing": "1 if host and devices share one address space",
    "pageableMemoryAccess": "1 if kernels may use ordinary (pageable) host memory in place",
    "managedMemory": "1 if managed memory is supported",
    "cooperativeLaunch": "1 if cooperative kernels (grid-wide synchronization) may be launched",
    "streamPrioritiesSupported": "1 if stream priorities are honoured",
    "memoryPoolsSupported": "1 if stream-ordered allocation (Stream.alloc) uses memory pools",
    "integrated": "1 if the device shares the host's memory",
    "pciBusID": "the PCI bus",
    "pciDeviceID": "the PCI device",
    "pciDomainID": "the PCI domain",
}

# How a host thread waits in a synchronize (Device.set_schedule), by HIP's names without hipDeviceSchedule.
SCHEDULES = ("auto", "spin", "yield", "blocking_sync")
