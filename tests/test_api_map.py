"""docs/api-map.md: every HIP graph and stream-capture function once, and every gpugraph call it names real."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import gpugraph as gg

MAP = Path(__file__).resolve().parents[1] / "docs" / "api-map.md"
# The names a reference may start with: the package, or one of its public classes.
_REFERENCE = re.compile(r"`((?:gg|Graph|GraphExec|Stream|Device|Event|Node|Capture|Condition|Kernel|Param|Array"
                        r"|UserObject)(?:\.[A-Za-z_]\w*)+)`")


def rows() -> list[list[str]]:
    return [[cell.strip() for cell in line.strip().strip("|").split("|")]
            for line in MAP.read_text().splitlines() if line.startswith("| `")]


def test_every_hip_function_is_mapped_once():
    hip = [row[0].strip("`") for row in rows() if row[0].startswith("`hip")]
    assert len(hip) == 112 and len(set(hip)) == len(hip)
    assert {"hipGraphAddKernelNode", "hipGraphExecUpdate", "hipStreamBeginCaptureToGraph", "hipUserObjectCreate",
            "hipGraphDebugDotPrint", "hipGraphLaunch_spt"} <= set(hip)


def test_every_gpugraph_call_the_map_names_exists():
    named = {match for row in rows() for cell in row[2:] for match in _REFERENCE.findall(cell)}
    assert len(named) > 40
    missing = []
    for reference in sorted(named):
        first, *rest = reference.split(".")
        value = gg if first == "gg" else getattr(gg, first)
        for part in rest:
            if not hasattr(value, part) and part not in getattr(value, "__annotations__", {}):  # (an attribute
                missing.append(reference)                                                    # set per instance)
                break
            value = getattr(value, part, None)
    assert missing == []


def test_each_row_has_a_gpugraph_answer():
    for row in rows():
        answer = row[-2] if row[0].startswith("`hip") else row[1]
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
