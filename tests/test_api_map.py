"""docs/api-map.md: every HIP graph and stream-capture function once, every HIP call the ROCm pages gpugraph follows
name, and every gpugraph call it names real."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import gpugraph as gg

MAP = Path(__file__).resolve().parents[1] / "docs" / "api-map.md"
# The names a reference may start with: the package, or one of its public classes.
_REFERENCE = re.compile(r"`((?:gg|Graph|GraphExec|Stream|Device|Event|Node|Capture|Condition|Kernel|Param|Array"
                        r"|UserObject|HostRegistration)(?:\.[A-Za-z_]\w*)+)`")
# The heading of the map's second part, the rest of HIP that the ROCm pages name (streams, events, memory, ...).
REST = "## The rest of HIP that the ROCm pages name"

# The HIP calls the pages gpugraph was designed from name, found with `hip[A-Z]\w*`:
# the functions, and the device properties they name (as the map's rows spell them).
PAGE_CALLS = {
    # ROCm's "Asynchronous concurrent execution"
    "hipStreamCreateWithFlags", "hipStreamSynchronize", "hipStreamWaitEvent", "hipLaunchKernelGGL",
    "hipMemcpyAsync", "hipMemcpyPeerAsync", "hipMemcpy", "hipSetDeviceFlags", "hipEventCreate", "hipEventRecord",
    "hipEventSynchronize", "hipMalloc", "hipFree", "hipGetErrorString",
    "hipDeviceProp_t.asyncEngineCount", "hipDeviceProp_t.concurrentKernels",
    # ROCm's "HIP graphs" (hipFree, hipMalloc, hipMemcpy, hipGetErrorString too)
    "hipGraphInstantiate", "hipGraphLaunch", "hipFreeAsync", "hipMallocAsync", "hipDeviceGetGraphMemAttribute",
    "hipDeviceGraphMemTrim", "hipMemPoolSetAccess", "hipStreamBeginCapture", "hipStreamEndCapture",
    "hipStreamBeginCaptureToGraph", "hipLaunchHostFunc", "hipGraphAddKernelNode", "hipGraphAddDependencies",
    "hipGraphCreate", "hipGraphAddMemAllocNode", "hipGraphAddHostNode", "hipGraphAddMemcpyNode1D",
    "hipGraphAddMemFreeNode",
}
# The calls of those pages' full programs (ROCm/HIP's docs/how-to/hip_runtime_api/asynchronous.rst and
# docs/tools/example_codes/graph_capture.hip, graph_creation.hip).
PAGE_CALLS_LOST = {"hipStreamCreate", "hipStreamCreateWithPriority", "hipStreamDestroy", "hipEventDestroy",
                   "hipDeviceSynchronize", "hipGraphDestroy", "hipGraphExecDestroy"}
# The pages' other HIP names outside the graph API (types, flags, copy kinds, results): the notes explain each.
PAGE_OTHER_NAMES = {"hipStream_t", "hipEvent_t", "hipError_t", "hipSuccess", "hipStreamDefault", "hipStreamNonBlocking",
                    "hipMemcpyHostToDevice", "hipMemcpyDeviceToHost"}
# The CUDA calls NVIDIA's post "Constructing CUDA Graphs with Dynamic Parameters" names: the CUDA twins of rows.
PAGE_CUDA_CALLS = {"cudaStreamBeginCapture", "cudaStreamGetCaptureInfo_v2", "cudaGraphAddKernelNode",
                   "cudaStreamUpdateCaptureDependencies", "cudaStreamEndCapture", "cudaGraphInstantiate",
                   "cudaGraphExecKernelNodeSetParams", "cudaGraphExecUpdate"}


def _rows(text: str) -> list[list[str]]:
    return [[cell.strip() for cell in line.strip().strip("|").split("|")]
            for line in text.splitlines() if line.startswith("| `")]


def rows() -> list[list[str]]:
    return _rows(MAP.read_text())


def parts() -> tuple[str, str]:
    """The map's text before its second part (the graph API) and from it on."""
    graph_api, heading, rest = MAP.read_text().partition(f"\n{REST}\n")
    assert heading, f"docs/api-map.md has no line {REST!r}"
    return graph_api, rest


def hip_names(table: list[list[str]]) -> list[str]:
    return [row[0].strip("`") for row in table if row[0].startswith("`hip")]


def test_every_hip_function_is_mapped_once():
    graph_api, rest = parts()
    hip = hip_names(_rows(graph_api))
    assert len(hip) == 112 and len(set(hip)) == len(hip)
    assert {"hipGraphAddKernelNode", "hipGraphExecUpdate", "hipStreamBeginCaptureToGraph", "hipUserObjectCreate",
            "hipGraphDebugDotPrint", "hipGraphLaunch_spt"} <= set(hip)
    everywhere = hip_names(rows())
    assert len(everywhere) == len(hip) + len(hip_names(_rows(rest))) and len(set(everywhere)) == len(everywhere)


def test_every_hip_call_the_pages_name_has_a_row():
    hip = set(hip_names(rows()))
    assert sorted((PAGE_CALLS | PAGE_CALLS_LOST) - hip) == []
    _, rest = parts()
    assert sorted(name for name in PAGE_OTHER_NAMES if not re.search(rf"\b{name}\b", rest)) == []
    cuda = {name for row in rows() if row[0].startswith("`hip") for name in re.findall(r"`(cuda\w+)`", row[1])}
    assert sorted(PAGE_CUDA_CALLS - cuda) == []


def test_no_row_is_missing_or_a_placeholder():
    """A row whose gpugraph call does not exist yet (``missing``), or a placeholder (a note that begins "being
    built:"), is work left: each fails here, named with what it would have to do."""
    left = [f"{row[0]}: {row[-2]}: {row[-1]}" for row in rows()
            if row[0].startswith("`hip") and (row[-2] == "missing" or row[-1].startswith("being built:"))]
    assert left == [], "work left in docs/api-map.md:\n" + "\n".join(left)


def test_every_gpugraph_call_the_map_names_exists():
    named = {match for row in rows() for cell in row[2:] for match in _REFERENCE.findall(cell)}
    assert len(named) > 40
    missing = []
    for reference in sorted(named):
        first, *rest = reference.split(".")
        value = gg if first == "gg" else getattr(gg, first, None)
        if value is None:  # (a class the package does not export)
            missing.append(reference)
            continue
        for part in rest:
            if not hasattr(value, part) and part not in getattr(value, "__annotations__", {}):  # (an attribute
                missing.append(reference)                                                    # set per instance)
                break
            value = getattr(value, part, None)
    assert missing == [], f"gpugraph lacks {', '.join(missing)}"


def test_each_row_has_a_gpugraph_answer():
    for row in rows():
        answer = row[-2] if row[0].startswith("`hip") else row[1]
        if answer == "missing":  # (test_no_row_is_missing_or_a_placeholder fails on it: the note says what is needed)
            assert row[-1], row
            continue
        assert answer and (_REFERENCE.search(answer) or answer.startswith("a kernel's call")), row


def test_the_hip_twins_of_the_driver_symbol_table_are_the_maps():
    """The CUDA backend's symbol table names each driver function's HIP twin (a HIP backend's table): those of the
    graph and capture API are the map's rows for the same function, the hipDrv* one where the map names the driver
    function (cuGraphAddMemcpyNode: hipDrvGraphAddMemcpyNode), else the one whose CUDA twin is its runtime form."""
    symbols = pytest.importorskip("gpugraph.backends.cuda._symbols")  # (it needs cuda-bindings)
    assert set(symbols.HIP_DIFFERS) <= set(symbols.CUDA)
    assert all(re.fullmatch(r"hip[A-Z]\w+", name) for name in symbols.HIP.values())
    mapped = {row[0].strip("`"): row[1] for row in rows() if row[0].startswith("`hip")}
    by_driver = {match.group(1): hip for hip, cuda in mapped.items() if (match := re.search(r"driver: (cu\w+)", cuda))}
    graph_api = re.compile(r"hip(Drv)?(Graph|StreamBeginCapture|StreamEndCapture|StreamIsCapturing|StreamGetCaptureInfo"
                           r"|StreamUpdateCaptureDependencies|ThreadExchangeStreamCaptureMode|UserObject|"
                           r"DeviceGetGraphMem|DeviceSetGraphMem|DeviceGraphMem)")
    wrong, checked = [], 0
    for generic, cuda in symbols.CUDA.items():
        hip = symbols.HIP.get(generic)
        if cuda in by_driver:
            checked += 1
            wrong += [(cuda, hip, by_driver[cuda])] if hip != by_driver[cuda] else []
        elif hip is not None and graph_api.match(hip):
            checked += 1
            runtime = "cuda" + cuda[2:] + ("_v2" if hip.endswith("_v2") else "")  # (HIP's capture info: v2's)
            wrong += [(cuda, hip, mapped.get(hip))] if mapped.get(hip) != f"`{runtime}`" else []
    assert checked > 70 and wrong == []
