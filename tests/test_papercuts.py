"""Mistakes and surprises that get a clear answer: a wrong ``$GPUGRAPH_CPU_DEVICES`` (``Device()`` and the
command line), a synchronous allocation under capture (the stream-ordered way named), arithmetic on a Param
(what it is and what to do), GPU-only benchmarks on the CPU, ``info`` where the CUDA backend is not installed,
the CUDA runtime's specifiers in kernel source, and ``StreamErrors`` as an ExceptionGroup."""

from __future__ import annotations

import importlib.util
import math
import operator
import os
import pathlib
import pickle
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import gpugraph as gg
import kernels as K
from gpugraph import bench
from gpugraph._errors import raise_stream_errors
from gpugraph.backends.cpu import MAX_DEVICES

if sys.version_info >= (3, 11):
    from builtins import BaseExceptionGroup, ExceptionGroup
else:
    from exceptiongroup import BaseExceptionGroup, ExceptionGroup

N = 8
GRID, BLOCK = K.launch_1d(N, 4)
X0 = np.arange(1, N + 1, dtype=np.float32)
SRC = str(pathlib.Path(gg.__file__).resolve().parents[1])
HIDE_CUDA = "import sys; sys.modules['cuda'] = None"  # the CUDA backend's package, as if not installed


def run_python(code: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``python -c CODE ARGS`` in a fresh interpreter, with the CUDA backend's package hidden (so that the CPU
    backend is the only one, as on a machine without a GPU) and ``env`` added."""
    environ = {k: v for k, v in os.environ.items() if k not in ("GPUGRAPH_BACKEND", "GPUGRAPH_CPU_DEVICES")}
    environ.update(env or {}, PYTHONPATH=os.pathsep.join(filter(None, [SRC, os.environ.get("PYTHONPATH")])))
    return subprocess.run([sys.executable, "-c", f"{HIDE_CUDA}\n{code}", *args], capture_output=True, text=True,
                          env=environ, timeout=120)


def run_gpugraph(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``python -m gpugraph ARGS`` (see ``run_python``)."""
    return run_python("import runpy\nsys.argv[0] = 'gpugraph'\nrunpy.run_module('gpugraph', run_name='__main__')",
                      *args, env=env)


# A wrong $GPUGRAPH_CPU_DEVICES where the CPU backend is the only one

BAD_COUNTS = ["0", "abc", str(MAX_DEVICES + 1)]


def bad_count_message(value: str) -> str:
    return f"cpu: $GPUGRAPH_CPU_DEVICES must be a whole number from 1 to {MAX_DEVICES}, got {value!r}"


@pytest.mark.parametrize("value", BAD_COUNTS)
def test_device_with_a_wrong_cpu_device_count_raises_backend_unavailable(value):
    code = textwrap.dedent("""
        import gpugraph as gg
        try:
            gg.Device()
        except gg.BackendUnavailableError as exc:
            print(exc)
    """)
    done = run_python(code, env={"GPUGRAPH_CPU_DEVICES": value})
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == bad_count_message(value) + "\n"


@pytest.mark.parametrize("command", [["info"], ["demo"], ["bench"], ["bench", "--workload", "rk4"]])
@pytest.mark.parametrize("value", BAD_COUNTS)
def test_command_line_says_a_wrong_cpu_device_count_in_one_line(command, value):
    done = run_gpugraph(*command, env={"GPUGRAPH_CPU_DEVICES": value})
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"python -m gpugraph {command[0]}: error: {bad_count_message(value)}\n"


# A synchronous allocation under capture names the stream-ordered one


STREAM_ALLOC = (r"use stream\.alloc\(shape, dtype\) instead: a stream-ordered allocation on the capturing stream "
                r"\(gg\.current_stream\(\) in a @captured function\), which the capture records as a graph "
                r"allocation node")


def test_synchronous_allocation_in_a_captured_function_names_stream_alloc(device, stream):
    @gg.captured
    def doubled(x):
        out = x.device.empty(N, np.float32)
        gg.current_stream(x.device).launch(K.add, GRID, BLOCK, out, x, x, N)
        return out

    @gg.captured
    def doubled_in_stream_order(x):
        s = gg.current_stream(x.device)
        out = s.alloc(N, np.float32)
        s.launch(K.add, GRID, BLOCK, out, x, x, N)
        return out

    x = K.f32(device, X0)
    with gg.use_stream(stream):
        with pytest.raises(gg.CaptureError, match=r"^Device\.empty: synchronous allocations and copies are forbidden "
                                                  r".*; the capture is invalidated; " + STREAM_ALLOC + "\n"):
            doubled(x)
        out = doubled_in_stream_order(x)  # what the message says works
        stream.synchronize()
        np.testing.assert_array_equal(out.to_numpy(), X0 * 2)


@pytest.mark.parametrize("call, instead", [
    (lambda d: d.zeros(N, np.float32), "Device.zeros: .*; " + STREAM_ALLOC + r", then stream\.memset\(array, 0\)"),
    (lambda d: d.asarray(X0), r"Device\.asarray: .*; copy the host data to the device before the capture"),
    (lambda d: d.pinned(N, np.float32), r"Device\.pinned: .*; allocate page-locked memory before the capture"),
])
def test_synchronous_allocation_in_a_capture_says_what_to_do_instead(device, stream, call, instead):
    with pytest.raises(gg.CaptureError, match=instead):
        with stream.capture():
            call(device)


# Arithmetic on a Param says what a Param is


PARAM_IS = (r"Param\(2\.0\) is a gpugraph Param, a placeholder for a kernel argument that is patched at each "
            r"launch \(a dynamic argument of @captured is one while the function is captured\), so Python cannot "
            r"compute with it: it can only be passed to kernels as an argument\. Do the computation on the device, "
            r"in the kernel that takes it, or make the argument non-dynamic \(each new value is then captured "
            r"anew\); outside a capture, `param\.value` is the current value$")


def test_arithmetic_on_a_dynamic_argument_says_what_it_is_and_what_to_do(device, stream):
    @gg.captured(dynamic=("f",))
    def scale_twice(x, f):
        gg.current_stream(x.device).launch(K.scale, GRID, BLOCK, x, f * 2, N)

    x = K.f32(device, X0)
    with gg.use_stream(stream):
        with pytest.raises(TypeError, match=r"^Param\(2\.0\) \* 2: " + PARAM_IS):
            scale_twice(x, 2.0)
        stream.launch(K.scale, GRID, BLOCK, x, 3.0, N)  # the stream still works
    stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), X0 * 3)


@pytest.mark.parametrize("expression, shown", [
    (lambda p: p + 1, r"Param\(2\.0\) \+ 1"),
    (lambda p: 1 + p, r"1 \+ Param\(2\.0\)"),
    (lambda p: p - 1, r"Param\(2\.0\) - 1"),
    (lambda p: 1.5 * p, r"1\.5 \* Param\(2\.0\)"),
    (lambda p: p / 2, r"Param\(2\.0\) / 2"),
    (lambda p: 7 // p, r"7 // Param\(2\.0\)"),
    (lambda p: p % 2, r"Param\(2\.0\) % 2"),
    (lambda p: p**2, r"Param\(2\.0\) \*\* 2"),
    (lambda p: p & 1, r"Param\(2\.0\) & 1"),
    (lambda p: p << 1, r"Param\(2\.0\) << 1"),
    (lambda p: -p, r"-Param\(2\.0\)"),
    (lambda p: abs(p), r"abs\(Param\(2\.0\)\)"),
    (lambda p: p < 3, r"Param\(2\.0\) < 3"),
    (lambda p: p >= 3, r"Param\(2\.0\) >= 3"),
    (lambda p: int(p), r"int\(Param\(2\.0\)\)"),
    (lambda p: float(p), r"float\(Param\(2\.0\)\)"),
    (lambda p: operator.index(p), r"Param\(2\.0\) as an index"),
    (lambda p: round(p), r"round\(Param\(2\.0\)\)"),
    (lambda p: math.floor(p), r"math\.floor\(Param\(2\.0\)\)"),
])
def test_a_param_refuses_arithmetic_saying_what_it_is(expression, shown):
    with pytest.raises(TypeError, match=f"^{shown}: {PARAM_IS}"):
        expression(gg.Param(2.0))


def test_a_param_keeps_identity_equality_and_hashing(device, stream):
    """Params are keys of the registries that patch them: == and hash stay identity's, and patching works."""
    alpha, other = gg.Param(2.0), gg.Param(2.0)
    assert alpha == alpha and alpha != other and alpha != 2.0
    assert {alpha: 1, other: 2}[alpha] == 1
    x = K.f32(device, X0)
    graph = gg.Graph(device)
    graph.add_kernel(K.scale, GRID, BLOCK, x, alpha, N)
    with graph.instantiate() as exe:
        alpha.value = 3.0
        K.launch_and_wait(exe, stream)
    np.testing.assert_array_equal(x.to_numpy(), X0 * 3)


# GPU-only benchmarks on the CPU

FAST = ["--repeats", "2", "--warmup", "0"]
NEEDS_GPU = r"needs a GPU backend \(--backend cuda\), and this run is on cpu:0 \(CPU reference device"


def test_bench_of_gpu_workloads_alone_on_the_cpu_is_one_line_and_status_2(capsys):
    assert bench.main(["--backend", "cpu", "--workload", "launch", *FAST]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert re.fullmatch(rf"python -m gpugraph bench: error: launch: {NEEDS_GPU} .*\)\n", err)
    assert bench.main(["--backend", "cpu", "--workload", "launch", "--workload", "memory", *FAST]) == 2
    assert re.fullmatch(rf"python -m gpugraph bench: error: launch, memory: each {NEEDS_GPU} .*\)\n",
                        capsys.readouterr().err)


def test_bench_says_which_workloads_it_skips_on_the_cpu(capsys):
    assert bench.main(["--backend", "cpu", "--workload", "launch", "--workload", "rk4", *FAST]) == 0
    out, err = capsys.readouterr()
    assert re.search(rf"^bench: skipped launch: {NEEDS_GPU}", err, re.M), err
    assert "0 figure(s)" not in err
    assert "| rk4 |" in out and "| launch |" not in out


def test_run_reports_a_skipped_gpu_workload_to_progress():
    told: list[str] = []
    rows = bench.run(gg.Device("cpu"), ["launch", "chain"], bench.Options(repeats=2, warmup=0, nodes=4),
                     progress=told.append)
    assert rows and {row.workload for row in rows} == {"chain"}
    assert re.match(rf"^\[1/2\] skipped launch: {NEEDS_GPU}", told[0]), told
    assert not any("launch: 0 figure(s)" in line for line in told)


# `info` where the compiled CUDA path is built but the CUDA backend is not installed


@pytest.mark.skipif(importlib.util.find_spec("gpugraph.backends.cuda._fast") is None,
                    reason="the compiled CUDA path is not built here (setup.py)")
def test_info_says_plainly_that_the_compiled_path_is_unused_without_cuda_bindings():
    done = run_gpugraph("info", env={"GPUGRAPH_COMPILED": "1"})  # (not turned off: the path is built here)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines()[-1] == ("CUDA compiled path: built, but unused: the CUDA backend's package, "
                                            "cuda-bindings, is not installed (see the cuda line above); the CPU "
                                            "backend does not need it")
    assert "not importable (ModuleNotFoundError" not in done.stdout.splitlines()[-1]


# The CUDA runtime's specifiers in a kernel's own declaration of cudaGraphSetConditional

RUNTIME_DECLARED = gg.Kernel(r"""
extern "C" __device__ __cudart_builtin__ void CUDARTAPI cudaGraphSetConditional(cudaGraphConditionalHandle handle,
                                                                                unsigned int value);

// Adds 1 to x[0] and counts n[0] down; the condition says whether it is still above 0.
extern "C" __global__ void count_down(float* x, unsigned int* n, cudaGraphConditionalHandle handle) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        x[0] += 1.0f;
        n[0] -= 1;
        cudaGraphSetConditional(handle, n[0] > 0);
    }
}
""", "count_down")


def test_a_kernel_declaring_the_runtimes_set_conditional_with_its_specifiers_runs(device, stream):
    x, n, graph = device.zeros(1, np.float32), device.asarray(np.array([4], np.uint32)), gg.Graph(device)
    condition = graph.condition(default=1)
    graph.add_while(condition).bodies[0].add_kernel(RUNTIME_DECLARED, 1, 1, x, n, condition)
    with graph.instantiate() as exe:
        K.launch_and_wait(exe, stream)
    assert x.to_numpy()[0] == 4.0 and n.to_numpy()[0] == 0


# StreamErrors is an ExceptionGroup


def fail_two_streams(device: gg.Device) -> None:
    a, b = device.stream(), device.stream()
    a.host(lambda: 1 / 0)
    b.host(lambda: (_ for _ in ()).throw(KeyError("on b")))


def test_stream_errors_is_an_exception_group_keeping_errors(device):
    fail_two_streams(device)
    with pytest.raises(gg.StreamErrors) as info:
        device.synchronize()
    error = info.value
    assert isinstance(error, ExceptionGroup) and isinstance(error, gg.GpuGraphError)
    assert [type(e) for e in error.errors] == [ZeroDivisionError, KeyError]
    assert list(error.exceptions) == error.errors
    assert re.match(r"^2 streams raised errors since their last synchronize: ZeroDivisionError: division by zero; "
                    r"KeyError: 'on b'", str(error))
    match, rest = error.split(ZeroDivisionError)
    assert type(match) is gg.StreamErrors and [type(e) for e in match.errors] == [ZeroDivisionError]
    assert type(rest) is gg.StreamErrors and [type(e) for e in rest.errors] == [KeyError]
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is gg.StreamErrors and [type(e) for e in copy.errors] == [ZeroDivisionError, KeyError]
    device.synchronize()  # each was reported once


@pytest.mark.skipif(sys.version_info < (3, 11), reason="except* is Python 3.11+ syntax")
def test_except_star_catches_a_member_of_stream_errors(device):
    fail_two_streams(device)
    caught: dict[str, list] = {}
    # (Compiled at run time: this file also runs on Python 3.10, whose parser refuses except*.)
    code = textwrap.dedent("""
        try:
            device.synchronize()
        except* ZeroDivisionError as group:
            caught["zero"] = list(group.errors)
        except* KeyError as group:
            caught["key"] = list(group.errors)
    """)
    exec(code, {"device": device, "caught": caught})
    assert [type(e) for e in caught["zero"]] == [ZeroDivisionError]
    assert [type(e) for e in caught["key"]] == [KeyError]


def test_errors_beyond_exceptions_are_a_base_exception_group():
    """A host function's SystemExit beside another stream's error: Python lets no ExceptionGroup hold it."""
    errors = [SystemExit(3), ValueError("x")]
    with pytest.raises(BaseExceptionGroup) as info:
        raise_stream_errors(errors)
    assert not isinstance(info.value, Exception)
    assert list(info.value.exceptions) == errors
    assert str(info.value).startswith("2 streams raised errors since their last synchronize: SystemExit: 3; ")
