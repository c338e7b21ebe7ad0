"""Copies to and from a module's ``__device__`` and ``__constant__`` variables (hipMemcpyToSymbol(Async),
hipGraphAddMemcpyNodeToSymbol/FromSymbol, hipGraphMemcpyNodeSetParamsToSymbol, hipGraphExecMemcpyNodeSetParams...):
``Device.symbol`` views the variable as an Array, and the kernels of the module read what the copies wrote, on
every backend."""

from __future__ import annotations

import numpy as np
import pytest

import gpugraph as gg

SOURCE = """
__device__ float coeffs[4];
__constant__ int table[3] = {7, 8, 9};
namespace ns { __device__ double inner[2][3]; }
__device__ unsigned long long counter;
typedef short word;
__device__ word words[5];
struct Pair { int a, b; };
__device__ Pair pairs[2];
static __device__ int hidden;
extern "C" __global__ void combine(float* out) {
    int i = threadIdx.x;
    out[i] = coeffs[i] * table[i % 3] + (float) ns::inner[1][2] + (float) counter + words[0] + pairs[1].b + hidden;
}
"""


def expected(coeffs, table, inner, counter, word0=0, pair_b=0):
    i = np.arange(4)
    return (np.asarray(coeffs, np.float32) * np.asarray(table)[i % 3] + inner[1, 2] + counter + word0
            + pair_b).astype(np.float32)


@pytest.fixture
def combine():
    # (A new source per test: a module's variables live as long as the process, and tests must not share them.)
    return gg.Kernel(SOURCE + f"// {np.random.default_rng().integers(1 << 62)}\n", "combine")


def test_symbols_take_their_declared_type_and_shape(device, combine):
    coeffs = device.symbol(combine, "coeffs")
    assert (coeffs.shape, coeffs.dtype, coeffs.nbytes) == ((4,), np.float32, 16)
    table = device.symbol(combine, "table")
    assert (table.shape, table.dtype) == ((3,), np.int32)
    np.testing.assert_array_equal(table.to_numpy(), [7, 8, 9])  # (its initializer)
    inner = device.symbol(combine, "ns::inner")
    assert (inner.shape, inner.dtype) == ((2, 3), np.float64)
    counter = device.symbol(combine, "counter")
    assert (counter.shape, counter.dtype) == ((), np.uint64)
    assert device.symbol(combine, "words").dtype == np.int16  # (a typedef's number type)
    pairs = device.symbol(combine, "pairs", dtype=np.int32)  # (a struct: its type given)
    assert pairs.shape == (4,)
    assert device.symbol(combine, "coeffs", dtype=np.uint8).shape == (16,)


def test_kernels_read_what_stream_copies_wrote_to_symbols(device, combine):
    stream = device.stream()
    stream.memcpy(device.symbol(combine, "coeffs"), np.array([1, 2, 3, 4], np.float32))
    inner = np.arange(6.0).reshape(2, 3)
    stream.memcpy(device.symbol(combine, "ns::inner"), inner)
    stream.memcpy(device.symbol(combine, "counter"), np.array(100, np.uint64))
    stream.memcpy(device.symbol(combine, "words"), np.array([3, 0, 0, 0, 0], np.int16))
    stream.memcpy(device.symbol(combine, "pairs", dtype=np.int32), np.array([0, 0, 0, 20], np.int32))
    out = device.zeros(4, np.float32)
    stream.launch(combine, 1, 4, out)
    stream.synchronize()
    np.testing.assert_array_equal(out.to_numpy(), expected([1, 2, 3, 4], [7, 8, 9], inner, 100, 3, 20))
    # ... and from them (MemcpyFromSymbol), with an offset (src_origin=)
    table, host = np.zeros(3, np.int32), np.zeros(2, np.float32)
    stream.memcpy(table, device.symbol(combine, "table"))
    stream.memcpy(host, device.symbol(combine, "coeffs"), shape=(2,), src_origin=(2,))
    stream.synchronize()
    np.testing.assert_array_equal(table, [7, 8, 9])
    np.testing.assert_array_equal(host, [3, 4])


def test_symbol_copies_as_graph_nodes_captured_and_set(device, combine):
    stream = device.stream()
    coeffs = device.symbol(combine, "coeffs")
    out = device.zeros(4, np.float32)
    zeros = np.zeros((2, 3))
    stream.memcpy(device.symbol(combine, "ns::inner"), zeros)
    stream.memcpy(device.symbol(combine, "counter"), np.array(0, np.uint64))
    g = gg.Graph(device)
    ones = device.asarray(np.ones(4, np.float32))
    to_symbol = g.add_memcpy(coeffs, ones)  # hipGraphAddMemcpyNodeToSymbol
    launch = g.add_kernel(combine, 1, 4, out, after=to_symbol)
    back = device.zeros(2, np.float32)
    from_symbol = g.add_memcpy(back, coeffs, shape=(2,), src_origin=(1,), after=launch)  # ...FromSymbol, offset 1
    exe = g.instantiate()
    exe.launch(stream)
    stream.synchronize()
    np.testing.assert_array_equal(out.to_numpy(), expected([1, 1, 1, 1], [7, 8, 9], zeros, 0))
    np.testing.assert_array_equal(back.to_numpy(), [1, 1])
    # An executable graph's copy to a symbol takes a new source and a new offset (...ExecMemcpyNodeSetParamsToSymbol)
    exe.set_memcpy(to_symbol, coeffs, device.asarray(np.full(2, 5, np.float32)), shape=(2,), dst_origin=(2,))
    exe.set_memcpy(from_symbol, back, coeffs, shape=(2,), src_origin=(2,))
    exe.launch(stream)
    stream.synchronize()
    np.testing.assert_array_equal(out.to_numpy(), expected([1, 1, 5, 5], [7, 8, 9], zeros, 0))
    np.testing.assert_array_equal(back.to_numpy(), [5, 5])
    # ... and the graph's nodes too (...MemcpyNodeSetParamsToSymbol, ...FromSymbol), which the executable graph
    # takes by update
    g.set_memcpy(to_symbol, coeffs, device.asarray(np.array([2, 3, 4, 5], np.float32)))
    g.set_memcpy(from_symbol, back, coeffs, shape=(2,), src_origin=(0,))
    assert from_symbol.params.src is coeffs
    exe.update(g)
    exe.launch(stream)
    stream.synchronize()
    np.testing.assert_array_equal(out.to_numpy(), expected([2, 3, 4, 5], [7, 8, 9], zeros, 0))
    np.testing.assert_array_equal(back.to_numpy(), [2, 3])
    # Captured: a stream copy to a symbol becomes a copy node (hipMemcpyToSymbolAsync under capture)
    threes = device.asarray(np.full(4, 3, np.float32))
    with stream.capture() as capture:
        stream.memcpy(coeffs, threes)
        stream.launch(combine, 1, 4, out)
    assert [n.kind for n in capture.graph.nodes] == [gg.NodeKind.MEMCPY, gg.NodeKind.KERNEL]
    with capture.graph.instantiate() as captured:
        captured.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(out.to_numpy(), expected([3, 3, 3, 3], [7, 8, 9], zeros, 0))


def test_a_template_instance_has_its_own_module_variables(device):
    source = """
    __device__ int base;
    template <typename T> __global__ void add_base(T* x) { x[threadIdx.x] += (T) base; }
    extern "C" __global__ void plain(int* x) { x[threadIdx.x] += base; }
    """ + f"// {np.random.default_rng().integers(1 << 62)}\n"
    plain, instance = gg.Kernel(source, "plain"), gg.Kernel(source, "add_base<int>")
    stream = device.stream()
    stream.memcpy(device.symbol(plain, "base"), np.array(10, np.int32))
    stream.memcpy(device.symbol(instance, "base"), np.array(1, np.int32))
    x = device.zeros(2, np.int32)
    stream.launch(plain, 1, 2, x)
    stream.launch(instance, 1, 2, x)
    stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), [11, 11])


def test_symbol_errors_name_the_variable_and_the_rule(device, combine):
    with pytest.raises(ValueError, match=r"symbol: the module of Kernel\('combine'\) on \S+ has no __device__, "
                                         r"__constant__ or __managed__ variable 'missing' \(looked up as 'missing'\)"):
        device.symbol(combine, "missing")
    with pytest.raises(ValueError, match=r"looked up as '_ZN2ns7missingE'"):
        device.symbol(combine, "ns::missing")
    with pytest.raises(ValueError, match=r"symbol: 'a b' is not a variable's name"):
        device.symbol(combine, "a b")
    with pytest.raises(TypeError, match=r"symbol: name must be a str"):
        device.symbol(combine, 3)
    with pytest.raises(TypeError, match=r"symbol: kernel must be a gg.Kernel, whose module holds the variable, got s"):
        device.symbol("combine", "coeffs")
    with pytest.raises(TypeError, match=r"symbol: gpugraph cannot read the type of 'pairs' .* dtype=\.\.\.\)"):
        device.symbol(combine, "pairs")
    with pytest.raises(ValueError, match=r"symbol: 'table' takes 12 bytes, not a whole number of float64 elements"):
        device.symbol(combine, "table", dtype=np.float64)
    with pytest.raises(ValueError, match=r"symbol: 'hidden' is declared static .* declare it without static"):
        device.symbol(combine, "hidden")
    coeffs = device.symbol(combine, "coeffs")
    with pytest.raises(ValueError, match=r"passes the end of dst"):
        device.stream().memcpy(coeffs, np.ones(3, np.float32), shape=(2,), dst_origin=(3,))
    broken = gg.Kernel("__device__ int v;\n__global__ void k(int* x) { x[0] = undefined_name; }", "k")
    with pytest.raises(gg.KernelCompileError):
        device.symbol(broken, "v")


def test_past_the_end_symbol_copy_nodes_are_refused(device, combine):
    # The stream's rule (test_symbol_errors_name_the_variable_and_the_rule) for copy nodes to and from a symbol
    # (hipGraphAddMemcpyNodeToSymbol/FromSymbol) and the graph's and executable graph's setters of them.
    coeffs = device.symbol(combine, "coeffs")  # (4 float32s: 16 bytes)
    stream = device.stream()
    stream.memcpy(coeffs, np.zeros(4, np.float32))
    values = device.asarray(np.array([1, 2, 3, 4], np.float32))
    five = device.zeros(5, np.float32)
    back = device.zeros(2, np.float32)
    g = gg.Graph(device)
    with pytest.raises(ValueError, match=r"^add_memcpy\(dst\): a box of shape \(2,\) at \(3,\) passes the end of dst "
                                         r"\(of shape \(4,\)\) along axis 0$"):
        g.add_memcpy(coeffs, values, shape=(2,), dst_origin=(3,))
    with pytest.raises(ValueError, match=r"^add_memcpy\(src\): a box of shape \(2,\) at \(3,\) passes the end of src "
                                         r"\(of shape \(4,\)\) along axis 0$"):
        g.add_memcpy(back, coeffs, shape=(2,), src_origin=(3,))
    with pytest.raises(ValueError, match=r"^add_memcpy: nbytes=20 exceeds dst \(16 bytes\) or src \(20 bytes\)$"):
        g.add_memcpy(coeffs, five, 20)
    with pytest.raises(ValueError, match=r"^add_memcpy: nbytes=20 exceeds dst \(20 bytes\) or src \(16 bytes\)$"):
        g.add_memcpy(five, coeffs, 20)
    assert len(g) == 0  # (nothing half-added)
    to_symbol = g.add_memcpy(coeffs, values, shape=(2,), dst_origin=(2,))  # coeffs[2:4] = values[0:2]
    from_symbol = g.add_memcpy(back, coeffs, shape=(2,), src_origin=(2,), after=to_symbol)  # back = coeffs[2:4]
    was = to_symbol.params, from_symbol.params
    with pytest.raises(ValueError, match=r"^set_memcpy\(dst\): a box of shape \(2,\) at \(3,\) passes the end of dst "
                                         r"\(of shape \(4,\)\) along axis 0$"):
        g.set_memcpy(to_symbol, coeffs, values, shape=(2,), dst_origin=(3,))
    with pytest.raises(ValueError, match=r"^set_memcpy: nbytes=20 exceeds dst \(16 bytes\) or src \(20 bytes\)$"):
        g.set_memcpy(to_symbol, coeffs, five, 20)
    with pytest.raises(ValueError, match=r"^set_memcpy\(src\): a box of shape \(2,\) at \(3,\) passes the end of src "
                                         r"\(of shape \(4,\)\) along axis 0$"):
        g.set_memcpy(from_symbol, back, coeffs, shape=(2,), src_origin=(3,))
    assert (to_symbol.params, from_symbol.params) == was  # the nodes keep their copies
    with g.instantiate() as exe:  # (made after the refusals: the backend's nodes kept theirs too)
        with pytest.raises(ValueError, match=r"^set_memcpy\(dst\): a box of shape \(2,\) at \(3,\) passes the end of "
                                             r"dst \(of shape \(4,\)\) along axis 0$"):
            exe.set_memcpy(to_symbol, coeffs, values, shape=(2,), dst_origin=(3,))
        with pytest.raises(ValueError, match=r"^set_memcpy\(src\): a box of shape \(2,\) at \(3,\) passes the end of "
                                             r"src \(of shape \(4,\)\) along axis 0$"):
            exe.set_memcpy(from_symbol, back, coeffs, shape=(2,), src_origin=(3,))
        exe.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(coeffs.to_numpy(), [0, 0, 1, 2])
    np.testing.assert_array_equal(back.to_numpy(), [1, 2])


def test_a_python_kernel_s_symbols_are_refused_on_every_backend(device):
    # (The CPU backend runs its Python implementation, with no module: so CUDA refuses them too, and the two agree.)
    kernel = gg.Kernel("__device__ int v;\n__global__ void k(int* x) { x[0] = v; }", "k", cpu=lambda launch, x: None)
    with pytest.raises(ValueError, match=r"symbol: Kernel\('k'\) has a Python implementation \(cpu=\), which the CPU "
                                         r"backend runs instead of its source"):
        device.symbol(kernel, "v")


def test_a_name_declared_in_two_namespaces_needs_its_dtype(device):
    kernel = gg.Kernel("""
    namespace a { __device__ int table[2]; }
    namespace b { __device__ float table[2]; }
    extern "C" __global__ void read_b(float* out) { out[0] = b::table[1]; }
    """ + f"// {np.random.default_rng().integers(1 << 62)}\n", "read_b")
    with pytest.raises(TypeError, match=r"cannot read the type of 'b::table' .*its name declared in several "
                                        r"namespaces"):
        device.symbol(kernel, "b::table")
    table = device.symbol(kernel, "b::table", dtype=np.float32)
    stream = device.stream()
    stream.memcpy(table, np.array([1.5, 2.5], np.float32))
    out = device.zeros(1, np.float32)
    stream.launch(kernel, 1, 1, out)
    stream.synchronize()
    np.testing.assert_array_equal(out.to_numpy(), [2.5])


def test_a_const_variable_is_not_exported(device):
    kernel = gg.Kernel("__device__ const int t[3] = {1, 2, 3};\n"
                       "extern \"C\" __global__ void k(int* x) { x[0] = t[threadIdx.x]; }", "k")
    # (CUDA's module exports it and the host compiler's library does not: refused on every backend.)
    with pytest.raises(ValueError, match=r"symbol: 't' is declared const in Kernel\('k'\)'s source, so no copy may "
                                         r"reach it on every backend .* declare it without const"):
        device.symbol(kernel, "t")
