"""What the CUDA driver itself does in the cases where gpugraph's CPU backend must match it: capture
joins after a frontier move (cases 1a-1i), graph-memory address reuse (2a-2c), pageable host memory (3b),
zero-byte copies (4a-4g), the legacy stream during a capture (6a-6g), instantiating a child node's embedded
graph (7a-7d), kernel parameter info (10a).

Raw cuda-bindings calls only (no gpugraph), so the answers are the driver's. Run on a GPU machine, from the
repository root: ``python tools/probes/gpu_probe_rules.py``.
"""

from __future__ import annotations

import numpy as np
from cuda.bindings import driver as cu
from cuda.bindings import nvrtc

GLOBAL = cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_GLOBAL
RELAXED = cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED


def ok(result):
    err = result[0]
    if err != cu.CUresult.CUDA_SUCCESS and err != 0:
        raise RuntimeError(cu.cuGetErrorName(err)[1].decode())
    return result[1] if len(result) == 2 else result[1:]


def name(err) -> str:
    return "CUDA_SUCCESS" if not err else cu.cuGetErrorName(err)[1].decode()


def row(what: str, outcome: str) -> None:
    print(f"{what:<70} {outcome}", flush=True)


def scenario(fn):
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - a probe reports what the driver said and goes on
        row(fn.__name__, f"EXCEPTION {type(exc).__name__}: {exc}")
    return fn


ok(cu.cuInit(0))
DEV = ok(cu.cuDeviceGet(0))
CTX = ok(cu.cuDevicePrimaryCtxRetain(DEV))
ok(cu.cuCtxSetCurrent(CTX))
BUF = ok(cu.cuMemAlloc(1 << 20))


def stream(blocking: bool = False):
    return ok(cu.cuStreamCreate(0 if blocking else 1))


def event():
    return ok(cu.cuEventCreate(cu.CUevent_flags.CU_EVENT_DISABLE_TIMING))


def work(s, value=1):
    ok(cu.cuMemsetD32Async(BUF, value, 16, s))


def fork(a, b):
    e = event()
    ok(cu.cuEventRecord(e, a))
    ok(cu.cuStreamWaitEvent(b, e, 0))


def frontier(s):
    info = ok(cu.cuStreamGetCaptureInfo(s))
    return info[2], list(info[3])[:info[5]]


def end(s):
    err, _graph = cu.cuStreamEndCapture(s)
    return name(err)


# 1. Joins and the frontier -------------------------------------------------------------------------

@scenario
def join_then_set_dependencies():
    a, b, c = stream(), stream(), stream()
    ok(cu.cuStreamBeginCapture(a, GLOBAL))
    work(a)
    fork(a, b)
    fork(a, c)
    work(b)
    work(c)
    fork(b, a)
    fork(c, a)
    graph, deps = frontier(a)
    node = ok(cu.cuGraphAddEmptyNode(graph, deps, len(deps)))
    ok(cu.cuStreamUpdateCaptureDependencies(a, [node], None, 1,
                                            cu.CUstreamUpdateCaptureDependencies_flags.CU_STREAM_SET_CAPTURE_DEPENDENCIES))
    row("1a fork b,c; work; join both; set frontier to new node after them", end(a))


@scenario
def join_then_set_unrelated():
    a, b = stream(), stream()
    ok(cu.cuStreamBeginCapture(a, GLOBAL))
    work(a)
    fork(a, b)
    work(b)
    fork(b, a)
    graph, _deps = frontier(a)
    node = ok(cu.cuGraphAddEmptyNode(graph, [], 0))  # a root: b's work is not reachable from it
    ok(cu.cuStreamUpdateCaptureDependencies(a, [node], None, 1,
                                            cu.CUstreamUpdateCaptureDependencies_flags.CU_STREAM_SET_CAPTURE_DEPENDENCIES))
    row("1b fork b; work; join; set frontier to an unrelated root node", end(a))


@scenario
def fork_no_work_no_join():
    a, b = stream(), stream()
    ok(cu.cuStreamBeginCapture(a, GLOBAL))
    work(a)
    fork(a, b)
    work(a)
    row("1c fork b; no work on b; never joined", end(a))


@scenario
def fork_work_no_join():
    a, b = stream(), stream()
    ok(cu.cuStreamBeginCapture(a, GLOBAL))
    work(a)
    fork(a, b)
    work(b)
    row("1d fork b; work on b; never joined", end(a))


@scenario
def join_then_more_work():
    a, b = stream(), stream()
    ok(cu.cuStreamBeginCapture(a, GLOBAL))
    work(a)
    fork(a, b)
    work(b)
    fork(b, a)
    work(b)
    row("1e fork b; work; join; more work on b", end(a))


@scenario
def reach_by_set_dependencies():
    a, b = stream(), stream()
    ok(cu.cuStreamBeginCapture(a, GLOBAL))
    work(a)
    fork(a, b)
    work(b)
    _, bdeps = frontier(b)
    ok(cu.cuStreamUpdateCaptureDependencies(a, bdeps, None, len(bdeps),
                                            cu.CUstreamUpdateCaptureDependencies_flags.CU_STREAM_ADD_CAPTURE_DEPENDENCIES))
    row("1f fork b; work; a's frontier gets b's node by update deps (no wait)", end(a))


@scenario
def join_through_third_stream():
    a, b, c = stream(), stream(), stream()
    ok(cu.cuStreamBeginCapture(a, GLOBAL))
    work(a)
    fork(a, b)
    fork(b, c)
    work(c)
    fork(c, b)
    work(b)
    fork(b, a)
    row("1g a->b->c; c joins b; b joins a", end(a))


@scenario
def join_into_side_stream_only():
    a, b, c = stream(), stream(), stream()
    ok(cu.cuStreamBeginCapture(a, GLOBAL))
    work(a)
    fork(a, b)
    fork(a, c)
    work(c)
    fork(c, b)
    work(b)
    row("1h a->b, a->c; c joins b; b never joins a", end(a))


@scenario
def join_wait_then_set_dependencies_empty_fork():
    a, b = stream(), stream()
    ok(cu.cuStreamBeginCapture(a, GLOBAL))
    work(a)
    fork(a, b)
    graph, _deps = frontier(a)
    node = ok(cu.cuGraphAddEmptyNode(graph, [], 0))
    ok(cu.cuStreamUpdateCaptureDependencies(a, [node], None, 1,
                                            cu.CUstreamUpdateCaptureDependencies_flags.CU_STREAM_SET_CAPTURE_DEPENDENCIES))
    row("1i fork b (no work, no join); a's frontier moved to an unrelated root", end(a))


# 2. Graph-memory addresses -------------------------------------------------------------------------

def alloc_params(nbytes):
    p = cu.CUDA_MEM_ALLOC_NODE_PARAMS()
    p.poolProps.allocType = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
    p.poolProps.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    p.poolProps.location.id = 0
    p.bytesize = nbytes
    return p


@scenario
def graph_alloc_reuse():
    g = ok(cu.cuGraphCreate(0))
    p1 = alloc_params(1 << 16)
    n1 = ok(cu.cuGraphAddMemAllocNode(g, [], 0, p1))
    f1 = ok(cu.cuGraphAddMemFreeNode(g, [n1], 1, p1.dptr))
    p2 = alloc_params(1 << 16)
    ok(cu.cuGraphAddMemAllocNode(g, [f1], 1, p2))
    row("2a alloc, free, alloc after the free in one graph: same address?",
        f"{int(p1.dptr) == int(p2.dptr)} ({int(p1.dptr):#x}, {int(p2.dptr):#x})")
    p3 = alloc_params(1 << 16)
    ok(cu.cuGraphAddMemAllocNode(g, [], 0, p3))
    row("2b another alloc concurrent with both: same address as either?",
        f"{int(p3.dptr) in (int(p1.dptr), int(p2.dptr))} ({int(p3.dptr):#x})")
    g2 = ok(cu.cuGraphCreate(0))
    p4 = alloc_params(1 << 16)
    ok(cu.cuGraphAddMemAllocNode(g2, [], 0, p4))
    row("2c alloc in a second graph: same address as the first graph's?",
        f"{int(p4.dptr) in (int(p1.dptr), int(p2.dptr), int(p3.dptr))} ({int(p4.dptr):#x})")


# 3. Pageable host memory ----------------------------------------------------------------------------

@scenario
def pointer_kinds():
    host = np.zeros(64, np.float32)
    pinned = ok(cu.cuMemHostAlloc(256, 0))
    for what, ptr in (("numpy (pageable)", host.ctypes.data), ("cuMemHostAlloc", int(pinned)),
                      ("cuMemAlloc", int(BUF))):
        err, value = cu.cuPointerGetAttribute(cu.CUpointer_attribute.CU_POINTER_ATTRIBUTE_MEMORY_TYPE, ptr)
        row(f"3a cuPointerGetAttribute(MEMORY_TYPE) of {what}", f"{name(err)} {value if not err else ''}")
    err, _flags = cu.cuMemHostGetFlags(host.ctypes.data)
    row("3b cuMemHostGetFlags of numpy (pageable)", name(err))


# 4. Zero-byte copies and memsets ---------------------------------------------------------------------

def copy3d(dst, src, nbytes):
    p = cu.CUDA_MEMCPY3D()
    p.srcMemoryType = cu.CUmemorytype.CU_MEMORYTYPE_DEVICE
    p.srcDevice = src
    p.dstMemoryType = cu.CUmemorytype.CU_MEMORYTYPE_DEVICE
    p.dstDevice = dst
    p.WidthInBytes = nbytes
    p.Height = 1
    p.Depth = 1
    return p


@scenario
def zero_bytes():
    g = ok(cu.cuGraphCreate(0))
    err, _ = cu.cuGraphAddMemcpyNode(g, [], 0, copy3d(BUF, int(BUF) + 1024, 0), CTX)
    row("4a memcpy node with 0 bytes", name(err))
    m = cu.CUDA_MEMSET_NODE_PARAMS()
    m.dst = BUF
    m.elementSize = 4
    m.width = 0
    m.height = 1
    m.value = 0
    err, _ = cu.cuGraphAddMemsetNode(g, [], 0, m, CTX)
    row("4b memset node with width 0", name(err))
    s = stream()
    ok(cu.cuStreamBeginCapture(s, GLOBAL))
    err = cu.cuMemcpyAsync(BUF, int(BUF) + 1024, 0, s)[0]
    row("4c captured cuMemcpyAsync of 0 bytes", name(err))
    err = cu.cuMemsetD32Async(BUF, 0, 0, s)[0]
    row("4d captured cuMemsetD32Async of 0 elements", name(err))
    info = ok(cu.cuStreamGetCaptureInfo(s))
    row("4e ... capture status after them", f"{info[0]}")
    err, graph = cu.cuStreamEndCapture(s)
    count = ok(cu.cuGraphGetNodes(graph, 0))[1] if not err else None
    row("4f ... end capture; nodes in the graph", f"{name(err)}; {count}")
    ok(cu.cuStreamSynchronize(s))
    err = cu.cuMemcpyAsync(BUF, int(BUF) + 1024, 0, s)[0]
    row("4g plain (uncaptured) cuMemcpyAsync of 0 bytes", name(err))


# 6. The legacy stream while a blocking stream captures --------------------------------------------------

@scenario
def legacy_is_capturing():
    s = stream(blocking=True)
    ok(cu.cuStreamBeginCapture(s, GLOBAL))
    err, status = cu.cuStreamIsCapturing(cu.CUstream(0))
    row("6a cuStreamIsCapturing(legacy) while a blocking stream captures (global)", f"{name(err)} {status}")
    err, status = cu.cuStreamIsCapturing(s)
    row("6b ... and the capture itself afterwards", f"{name(err)} {status}")
    row("6c ... end capture", end(s))
    s2 = stream(blocking=False)
    ok(cu.cuStreamBeginCapture(s2, GLOBAL))
    err, status = cu.cuStreamIsCapturing(cu.CUstream(0))
    row("6d cuStreamIsCapturing(legacy) while a non-blocking stream captures", f"{name(err)} {status}")
    row("6e ... end capture", end(s2))
    s3 = stream(blocking=True)
    ok(cu.cuStreamBeginCapture(s3, RELAXED))
    err, status = cu.cuStreamIsCapturing(cu.CUstream(0))
    row("6f cuStreamIsCapturing(legacy) while a blocking stream captures (relaxed)", f"{name(err)} {status}")
    row("6g ... end capture", end(s3))


# 7. A child node's embedded graph -------------------------------------------------------------------------

@scenario
def embedded_graph_instantiate():
    child = ok(cu.cuGraphCreate(0))
    ok(cu.cuGraphAddEmptyNode(child, [], 0))
    parent = ok(cu.cuGraphCreate(0))
    node = ok(cu.cuGraphAddChildGraphNode(parent, [], 0, child))
    embedded = ok(cu.cuGraphChildGraphNodeGetGraph(node))
    err, _exe = cu.cuGraphInstantiate(embedded, 0)
    row("7a cuGraphInstantiate of cuGraphChildGraphNodeGetGraph's graph", name(err))
    err, clone = cu.cuGraphClone(embedded)
    row("7b cuGraphClone of it", name(err))
    if not err:
        err, _exe = cu.cuGraphInstantiate(clone, 0)
        row("7c cuGraphInstantiate of the clone", name(err))
    err, _ = cu.cuGraphAddEmptyNode(embedded, [], 0)
    row("7d cuGraphAddEmptyNode into the embedded graph", name(err))


# 10. What the driver reports of a kernel's parameters ---------------------------------------------------------

@scenario
def param_info():
    src = b"typedef float real; extern \"C\" __global__ void k(real** p, double d, char c, int n){}"
    prog = ok(nvrtc.nvrtcCreateProgram(src, b"k.cu", 0, [], []))
    ok(nvrtc.nvrtcCompileProgram(prog, 1, [b"-arch=sm_90"]))
    size = ok(nvrtc.nvrtcGetCUBINSize(prog))
    cubin = b" " * size
    ok(nvrtc.nvrtcGetCUBIN(prog, cubin))
    module = ok(cu.cuModuleLoadData(cubin))
    fn = ok(cu.cuModuleGetFunction(module, b"k"))
    for i in range(5):
        err, *rest = cu.cuFuncGetParamInfo(fn, i)
        row(f"10a cuFuncGetParamInfo(k, {i}) -> offset, size", f"{name(err)} {rest if not err else ''}")


print("done", flush=True)
