"""What the CUDA driver answers for an event last recorded inside a capture that has ended: a wait from
another stream, a synchronize and a query, then the same after the event is recorded again outside a capture.
Measured on the H200 (2026-11-23): CUDA_ERROR_INVALID_VALUE for all three, success once recorded again.

Usage (on a CUDA machine): python3 tools/probes/gpu_probe_ended_capture_event.py
"""

from __future__ import annotations

from cuda.bindings import driver as cu


def main() -> None:
    cu.cuInit(0)
    device = cu.cuDeviceGet(0)[1]
    cu.cuCtxSetCurrent(cu.cuDevicePrimaryCtxRetain(device)[1])
    capturing, other = cu.cuStreamCreate(1)[1], cu.cuStreamCreate(1)[1]
    event = cu.cuEventCreate(2)[1]
    memory = cu.cuMemAlloc(64)[1]
    print("begin", cu.cuStreamBeginCapture(capturing, cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_GLOBAL))
    print("memset", cu.cuMemsetD8Async(memory, 1, 64, capturing))
    print("record", cu.cuEventRecord(event, capturing))
    print("end", cu.cuStreamEndCapture(capturing)[0])
    print("wait after end:", cu.cuStreamWaitEvent(other, event, 0))
    print("event sync after end:", cu.cuEventSynchronize(event))
    print("event query after end:", cu.cuEventQuery(event))
    print("record again:", cu.cuEventRecord(event, capturing), "wait:", cu.cuStreamWaitEvent(other, event, 0))


if __name__ == "__main__":
    main()
