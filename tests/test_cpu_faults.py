"""A kernel's memory mistakes on the CPU backend: an access past the end of an Array, or through an address of no
memory, and a condition set through a handle that names no condition of the graph the kernel runs in, stop the
kernel with CUDA's illegal-address error, as a GPU's fault does, and the interpreter goes on; each CPU device has a
module instance of its own, as each GPU has.

The stopping kernels run in a child interpreter, so that a regression fails its test instead of ending the suite.
"""

from __future__ import annotations

import os
import platform
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import gpugraph as gg

SOURCE = r"""
extern "C" __device__ void cudaGraphSetConditional(unsigned long long handle, unsigned int value);

extern "C" __global__ void fill(int* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = i;
}

extern "C" __global__ void total(const int* x, int n, int* out) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        int sum = 0;
        for (int i = 0; i < n; ++i) sum += x[i];
        out[0] = sum;
    }
}

extern "C" __global__ void set_condition(unsigned long long handle, unsigned int value) {
    if (threadIdx.x == 0 && blockIdx.x == 0) cudaGraphSetConditional(handle, value);
}

extern "C" __global__ void add(int* x, int value) {
    if (threadIdx.x == 0 && blockIdx.x == 0) x[0] += value;
}
"""

# Blocks that synchronize run as fibers: a fault on a fiber's stack stops the kernel too.
BARRIER_SOURCE = r"""
extern "C" __global__ void fill_at_a_barrier(int* x, int n) {
    __syncthreads();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = i;
}
"""

PRELUDE = f"""
import gc
import numpy as np
import gpugraph as gg
SOURCE = {SOURCE!r}
BARRIER_SOURCE = {BARRIER_SOURCE!r}
FILL, TOTAL = gg.Kernel(SOURCE, "fill"), gg.Kernel(SOURCE, "total")
SET, ADD = gg.Kernel(SOURCE, "set_condition"), gg.Kernel(SOURCE, "add")
FILL_AT_A_BARRIER = gg.Kernel(BARRIER_SOURCE, "fill_at_a_barrier")
device = gg.Device("cpu")
stream = device.stream()


def stopped(run):
    try:
        run()
        stream.synchronize()
    except gg.BackendError as error:
        print("STOPPED", error.code)
        print(error)
    else:
        print("NOT STOPPED")


def works_after():
    x = device.zeros(64, np.int32)
    stream.launch(FILL, 1, 64, x, 64)
    stream.synchronize()
    print("AFTER", int(x.to_numpy().sum()))
"""


def run_cpu(script: str) -> subprocess.CompletedProcess:
    """``script`` after PRELUDE, in a child interpreter on the CPU backend."""
    return subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(script)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})


def stopped_then_working(script: str) -> str:
    """The output of ``script``, which ends with works_after(): checked that the kernel stopped with CUDA's
    illegal-address error and that the interpreter went on to run a kernel right."""
    done = run_cpu(textwrap.dedent(script) + "\nworks_after()\n")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "STOPPED CUDA_ERROR_ILLEGAL_ADDRESS" in done.stdout, done.stdout + done.stderr
    assert "AFTER 2016" in done.stdout, done.stdout  # (0 + 1 + ... + 63)
    return done.stdout


# What the message calls the access: whether a read or a write, where the fault tells it (x86-64 Linux).
TELLS = sys.platform.startswith("linux") and platform.machine() == "x86_64"
WRITE, READ = ("a write to", "a read of") if TELLS else ("an access to", "an access to")


def only_cpu(device: gg.Device) -> None:
    if device.backend != "cpu":
        pytest.skip("on a GPU an access past an allocation's end faults only where no memory follows it, and what "
                    "a handle that names no condition does is the driver's: this is the CPU backend's rule")


# Accesses past the end of an Array

PAST_THE_END = {
    "device memory": """
        x = device.zeros(64, np.int32)
        stopped(lambda: stream.launch(FILL, 1, 128, x, 128))
    """,
    "a block of fibers": """
        x = device.zeros(64, np.int32)
        stopped(lambda: stream.launch(FILL_AT_A_BARRIER, 1, 128, x, 128))
    """,
    "stream-ordered memory": """
        x = stream.alloc(64, np.int32)
        stopped(lambda: stream.launch(FILL, 1, 128, x, 128))
        stream.free(x)
        stream.synchronize()
    """,
    "graph memory": """
        graph = gg.Graph(device)
        node = graph.add_alloc(64, np.int32)
        kernel = graph.add_kernel(FILL, 1, 128, node.array, 128, after=node)
        graph.add_free(node.array, after=kernel)
        exe = graph.instantiate()
        stopped(lambda: exe.launch(stream))
    """,
    "a kernel node": """
        x = device.zeros(64, np.int32)
        graph = gg.Graph(device)
        graph.add_kernel(FILL, 1, 128, x, 128)
        exe = graph.instantiate()
        stopped(lambda: exe.launch(stream))
    """,
}


@pytest.mark.stops_a_kernel
@pytest.mark.parametrize("memory", list(PAST_THE_END))
def test_a_write_past_the_end_of_an_array_stops_the_kernel_with_an_illegal_address(device, memory):
    """Thread 64 of a launch of 128 over an Array of 64 ints writes the first int past its end: the kernel stops
    there with CUDA's illegal-address error, which names the block, the thread, the write and the Array."""
    only_cpu(device)
    out = stopped_then_working(PAST_THE_END[memory])
    assert f"the kernel stopped: block (0, 0, 0), thread (64, 0, 0): illegal address: {WRITE} 0x" in out, out
    assert "0 bytes past the end of argument 0 (int* x: 64 int32)" in out, out


@pytest.mark.stops_a_kernel
def test_a_read_past_the_end_of_an_array_stops_the_kernel(device):
    only_cpu(device)
    out = stopped_then_working("""
        x, out = device.asarray(np.ones(64, np.int32)), device.zeros(1, np.int32)
        stopped(lambda: stream.launch(TOTAL, 1, 1, x, 100, out))
        assert out.to_numpy()[0] == 0  # (the kernel stopped before its write)
    """)
    assert f"block (0, 0, 0), thread (0, 0, 0): illegal address: {READ} 0x" in out, out
    assert "0 bytes past the end of argument 0 (int* x: 64 int32)" in out, out


@pytest.mark.stops_a_kernel
def test_a_write_past_the_end_in_a_large_launch_stops_the_kernel_on_any_worker(device):
    """A launch of 2^15 threads or more runs its blocks on several threads: the fault stops it on any of them. The
    Array's 64506 ints (258024 bytes) are not a whole number of 256 bytes (the backend's alignment): the first bytes
    past it are still the allocation's, and the first write that faults is thread 0 of block 252's, at byte 258048
    (the launch's other threads write nothing past the end)."""
    only_cpu(device)
    out = stopped_then_working("""
        x = device.zeros(64506, np.int32)
        stopped(lambda: stream.launch(FILL, 256, 256, x, 64513))
    """)
    assert f"block (252, 0, 0), thread (0, 0, 0): illegal address: {WRITE} 0x" in out, out
    assert "24 bytes past the end of argument 0 (int* x: 64506 int32)" in out, out


@pytest.mark.stops_a_kernel
def test_an_access_through_an_address_of_no_memory_stops_the_kernel(device):
    """A null or wild pointer is an illegal address on a GPU; so it is on the CPU backend, where the message gives
    the address (no Array holds it)."""
    only_cpu(device)
    out = stopped_then_working("""
        null = np.zeros(1, np.uint64)  # (a kernel taking an Array of addresses reads them as pointers)
        source = 'extern "C" __global__ void deref(int** p) { *p[0] = 1; }'
        stopped(lambda: stream.launch(gg.Kernel(source, "deref"), 1, 1, device.asarray(null)))
    """)
    assert f"block (0, 0, 0), thread (0, 0, 0): illegal address: {WRITE} 0x0" in out, out
    assert "past the end" not in out, out


def test_a_fault_outside_a_kernel_is_left_to_the_handler_before(device):
    """gpugraph's handler turns only the faults of its kernels into errors: a fault in other code, once a kernel
    library is loaded, still ends the process as it would have without gpugraph."""
    only_cpu(device)
    done = run_cpu("""
        works_after()
        import ctypes
        ctypes.c_int.from_address(16).value  # (a read of the first page, which no process maps)
        print("SURVIVED")
    """)
    assert "AFTER 2016" in done.stdout and "SURVIVED" not in done.stdout, done.stdout + done.stderr
    assert done.returncode == -signal.SIGSEGV, done.returncode


# Conditions set through handles that name none of the running graph's

HANDLES = {
    "a number, on a stream": """
        stopped(lambda: stream.launch(SET, 1, 1, np.uint64(12345), np.uint32(1)))
    """,
    "a number, in a graph": """
        graph = gg.Graph(device)
        condition = graph.condition()
        setter = graph.add_kernel(SET, 1, 1, np.uint64(12345), np.uint32(1))
        graph.add_if(condition, after=setter).bodies[0].add_kernel(ADD, 1, 1, device.zeros(1, np.int32), 1)
        exe = graph.instantiate()
        stopped(lambda: exe.launch(stream))
    """,
    "a collected graph's condition": """
        graph = gg.Graph(device)
        condition = graph.condition()
        graph.add_if(condition)
        stale = np.uint64(condition._value)
        del graph, condition
        gc.collect()
        other = gg.Graph(device)
        other.add_kernel(SET, 1, 1, stale, np.uint32(1))
        exe = other.instantiate()
        stopped(lambda: exe.launch(stream))
    """,
    "another live graph's condition": """
        x = device.zeros(1, np.int32)
        first = gg.Graph(device)
        condition = first.condition(default=0)
        first.add_if(condition).bodies[0].add_kernel(ADD, 1, 1, x, 1)
        first_exe = first.instantiate()
        second = gg.Graph(device)
        second.add_kernel(SET, 1, 1, np.uint64(condition._value), np.uint32(1))
        second_exe = second.instantiate()
        stopped(lambda: second_exe.launch(stream))
        first_exe.launch(stream)
        stream.synchronize()
        assert x.to_numpy()[0] == 0, x.to_numpy()  # (its condition kept its default: the body did not run)
    """,
}


@pytest.mark.stops_a_kernel
@pytest.mark.parametrize("handle", list(HANDLES))
def test_set_conditional_through_a_handle_of_no_condition_of_the_running_graph_stops_the_kernel(device, handle):
    """cudaGraphSetConditional sets a condition of the graph the kernel runs in (or of one of its bodies); any
    other handle stops the kernel with an illegal address, and nothing is written."""
    only_cpu(device)
    out = stopped_then_working(HANDLES[handle])
    assert "block (0, 0, 0), thread (0, 0, 0): illegal address: cudaGraphSetConditional(0x" in out, out
    if handle == "a number, on a stream":
        assert "cudaGraphSetConditional(0x3039, 1): the kernel runs outside a graph, which has no condition" in out, out
    else:
        assert "names no condition of the graph the kernel runs in" in out, out


def test_a_kernel_in_a_body_of_a_body_sets_a_condition_of_the_graph(device, stream):
    """The handles a kernel may set are those of its graph's conditions, wherever the kernel lies in the graph: here
    in the body of an IF in the body of a WHILE, setting the WHILE's condition."""
    x, graph = device.zeros(1, np.int32), gg.Graph(device)
    outer, inner = graph.condition(default=1), graph.condition(default=1)
    body = graph.add_while(outer).bodies[0]
    add = body.add_kernel(gg.Kernel(SOURCE, "add"), 1, 1, x, 5)
    inner_body = body.add_if(inner, after=add).bodies[0]
    inner_body.add_kernel(gg.Kernel(SOURCE, "set_condition"), 1, 1, outer, np.uint32(0))
    with graph.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
    assert x.to_numpy()[0] == 5  # (one run of the WHILE's body: the IF's kernel ended the loop)


# Module variables, per device

VARIABLES = r"""
__device__ int weight[4];
extern "C" __global__ void weigh(int* x) { x[threadIdx.x] *= weight[threadIdx.x]; }
"""


def test_each_device_has_its_own_module_variables(pair):
    """As each GPU loads a module of its own, each device's __device__ variables are its own: a copy to the last
    device's leaves the first device's as it was, and the first device's kernel reads its own."""
    first, second = pair
    kernel = gg.Kernel(VARIABLES, "weigh")
    mine, theirs = first.symbol(kernel, "weight"), second.symbol(kernel, "weight")
    on_first, on_second = first.stream(), second.stream()
    on_first.memcpy(mine, np.array([1, 2, 3, 4], np.int32))
    on_first.synchronize()
    on_second.memcpy(theirs, np.array([10, 20, 30, 40], np.int32))
    on_second.synchronize()
    assert mine.ptr != theirs.ptr
    np.testing.assert_array_equal(mine.to_numpy(), [1, 2, 3, 4])
    np.testing.assert_array_equal(theirs.to_numpy(), [10, 20, 30, 40])
    x, y = first.asarray(np.ones(4, np.int32)), second.asarray(np.ones(4, np.int32))
    on_first.launch(kernel, 1, 4, x)
    on_second.launch(kernel, 1, 4, y)
    on_first.synchronize()
    on_second.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), [1, 2, 3, 4])
    np.testing.assert_array_equal(y.to_numpy(), [10, 20, 30, 40])


WAIT_THEN_WRITE = gg.Kernel(r'''
extern "C" __global__ void wait_then_write(volatile int* gate, int* x, int n) {
    gate[0] = 1;  // started
    while (gate[1] == 0) { }
    for (int i = 0; i < n; ++i) x[i] = 0x5a5a5a5a;
}''', "wait_then_write")


def test_a_kernel_keeps_its_memory_mapped_while_it_runs_even_when_a_racing_free_releases_it():
    """A free that is not ordered after a running kernel (a use-after-free, undefined in CUDA) must not let the
    kernel's later writes land in memory a new allocation got: the launch holds its arguments' memory until it ends."""
    device = gg.Device("cpu")
    running, other = device.stream(), device.stream()
    gate = np.zeros(2, np.int32)
    x = running.alloc(64, np.int32)
    with device.register_host(gate) as registration:
        running.launch(WAIT_THEN_WRITE, 1, 1, registration.device_array, x, 64)
        deadline = time.monotonic() + 120
        while gate[0] == 0:  # (until the kernel runs: its arguments are packed)
            assert time.monotonic() < deadline, "the kernel did not start"
            time.sleep(0.001)
        other.free(x)
        other.synchronize()  # (the pool releases what is free)
        fresh = device.zeros(64, np.int32)
        gate[1] = 1
        running.synchronize()
    assert not fresh.to_numpy().any()
