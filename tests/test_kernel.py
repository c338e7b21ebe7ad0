"""Kernels: signatures read from C++ source, argument conversion and its errors, launch-shape checks,
and the CPU implementation contract (launch shape honoured, missing implementation reported at launch)."""

from __future__ import annotations

import numpy as np
import pytest

import gpugraph as gg
import kernels as K
from gpugraph._signature import parse_signature


def params(source: str, name: str):
    sig = gg.Kernel(source, name).signature
    return None if sig is None else [(p.name, p.ctype, p.pointer, p.dtype) for p in sig]


F32, F64, I32, U64 = (np.dtype(t) for t in (np.float32, np.float64, np.int32, np.uint64))


# Signature parsing


def test_seed_kernels_signatures():
    assert params(K.SEED_SOURCE, "kernelA") == [("arrayA", "double*", True, F64), ("size", "size_t", False, U64)]
    assert params(K.SEED_SOURCE, "kernelB") == [("arrayB", "int*", True, I32), ("size", "size_t", False, U64)]
    assert params(K.SEED_SOURCE, "kernelC") == [("arrayA", "double*", True, F64), ("arrayB", "int*", True, I32),
                                                ("size", "size_t", False, U64)]


def test_test_kernel_signatures():
    assert params(K.SOURCE, "scale") == [("x", "float*", True, F32), ("f", "float", False, F32),
                                         ("n", "int", False, I32)]
    assert params(K.SOURCE, "axpy")[0] == ("a", "float", False, F32)


@pytest.mark.parametrize("source, expected", [
    ("__global__ void k(){}", []),
    ("__global__ void k(void){}", []),
    ('extern "C" __global__ void k(float* __restrict__ x, const unsigned int n){}',
     [("x", "float*", True, F32), ("n", "unsigned int", False, np.dtype(np.uint32))]),
    ("__global__ void __launch_bounds__(256) k(long long a, unsigned char* b){}",
     [("a", "long long", False, np.dtype(np.int64)), ("b", "unsigned char*", True, np.dtype(np.uint8))]),
    ("__global__ void k(float *x, double y[], int16_t z){}",
     [("x", "float*", True, F32), ("y", "double*", True, F64), ("z", "int16_t", False, np.dtype(np.int16))]),
    ("template <typename T> __global__ void k(T* x, int n){}", [("x", "T*", True, None), ("n", "int", False, I32)]),
    ("// __global__ void k(double z){}\n/* __global__ void k(char c){} */\n__global__ void k(int i){}",
     [("i", "int", False, I32)]),
    ("__global__ void k(float*, int);", [("", "float*", True, F32), ("", "int", False, I32)]),
])
def test_signature_parsing(source, expected):
    assert params(source, "k") == expected


def test_signature_picks_the_named_kernel_not_a_prefix():
    source = "__global__ void kk(double* a){}\n__global__ void k(int* b){}"
    assert params(source, "k") == [("b", "int*", True, I32)]
    assert params(source, "kk") == [("a", "double*", True, F64)]


def test_signature_unnamed_multi_word_scalar():
    """An unnamed multi-word scalar ('unsigned short') is one type of no name: its last word is no name."""
    assert params("__global__ void k(float*, unsigned short, unsigned char);", "k") == [
        ("", "float*", True, F32), ("", "unsigned short", False, np.dtype(np.uint16)),
        ("", "unsigned char", False, np.dtype(np.uint8))]


def test_signature_of_missing_kernel_is_none():
    assert parse_signature(K.SOURCE, "nope") is None


@pytest.mark.parametrize("args, match", [
    ((1, "k"), "source must be a str"),
    (("src", "not an identifier"), "name must be the kernel's identifier"),
    (("src", 3), "name must be"),
])
def test_kernel_constructor_type_errors(args, match):
    with pytest.raises(TypeError, match=match):
        gg.Kernel(*args)


def test_kernel_constructor_options_and_cpu_checked():
    with pytest.raises(TypeError, match="options must be a sequence of str"):
        gg.Kernel(K.SOURCE, "scale", options="-O3")
    with pytest.raises(TypeError, match="options must be a sequence of str"):
        gg.Kernel(K.SOURCE, "scale", options=("-O3", 3))
    with pytest.raises(TypeError, match="cpu must be callable"):
        gg.Kernel(K.SOURCE, "scale", cpu=42)
    k = gg.Kernel(K.SOURCE, "scale", options=["-use_fast_math"])
    assert k.options == ("-use_fast_math",) and k.name == "scale" and k.cpu is None


# Argument conversion (observed on graph kernel nodes, which keep the converted arguments)


def test_python_scalars_become_the_declared_c_types(device):
    g = gg.Graph(device)
    x = device.zeros(4, np.float32)
    node = g.add_kernel(K.scale, 1, 4, x, 0.1, 4)
    _, f, n = node.params.args
    assert type(f) is np.float32 and f == np.float32(0.1)
    assert type(n) is np.int32 and n == 4
    d = device.zeros(4, np.float64)
    _, size = g.add_kernel(K.inc, 1, 4, d, 4).params.args
    assert type(size) is np.uint64 and size == 4


def test_integral_float_to_int_and_numpy_scalars_accepted(device):
    g = gg.Graph(device)
    x = device.zeros(4, np.int32)
    _, v, n = g.add_kernel(K.fill, 1, 4, x, np.int64(7), np.uint8(4)).params.args
    assert (type(v), v, type(n), n) == (np.int32, 7, np.int32, 4)


@pytest.mark.parametrize("args", [(0.1, 4), (np.float64(0.25), np.uint8(3)), (3, 4.0), (np.float32(2), 2**31 - 1)])
def test_graph_nodes_and_captured_launches_type_arguments_alike(device, stream, args):
    # A graph node's and a captured launch's arguments are converted and typed in one pass; the result must be
    # what typing the converted arguments of an uncaptured launch gives.
    x = device.zeros(4, np.float32)
    explicit = gg.Graph(device).add_kernel(K.scale, 1, 4, x, *args).params.args
    with stream.capture() as cap:
        stream.launch(K.scale, 1, 4, x, *args)
    captured = cap.graph.nodes[0].params.args
    reference = K.scale.typed_args(K.scale.convert_args((x, *args), device))
    assert explicit[0] is captured[0] is x
    for got, also, want in zip(explicit[1:], captured[1:], reference[1:]):
        assert type(got) is type(also) is type(want) and got == also == want


def test_scale_with_python_float_gives_float32_result(device, stream):
    host = np.array([1, 2, 3, 4, 5], np.float32)
    x = device.asarray(host)
    stream.launch(K.scale, 1, 8, x, 0.1, 5)
    stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), host * np.float32(0.1))


@pytest.mark.parametrize("kernel, args, index, ctype", [
    (K.fill, ("A", 2**31, 4), 1, "int v"),
    (K.fill, ("A", -2**31 - 1, 4), 1, "int v"),
    (K.inc, ("D", -1), 1, "size_t n"),
    (K.inc, ("D", 2**64), 1, "size_t n"),
])
def test_scalar_overflow_raises_value_error(device, stream, kernel, args, index, ctype):
    arrays = {"A": device.zeros(4, np.int32), "D": device.zeros(4, np.float64)}
    args = tuple(arrays.get(a, a) if isinstance(a, str) else a for a in args)
    with pytest.raises(ValueError, match=rf"argument {index} \({ctype}\).*does not fit"):
        stream.launch(kernel, 1, 4, *args)


@pytest.mark.parametrize("bad", ["3", [3], None, b"3", 2 + 1j])
def test_unsupported_scalar_raises_type_error_naming_index_and_type(device, stream, bad):
    x = device.zeros(4, np.int32)
    with pytest.raises(TypeError, match=r"Kernel\('fill'\) argument 1 \(int v\): expects a C int scalar, got"):
        stream.launch(K.fill, 1, 4, x, bad, 4)


def test_non_integral_float_for_int_raises_type_error(device, stream):
    x = device.zeros(4, np.int32)
    with pytest.raises(TypeError, match=r"argument 2 \(int n\): expects an integer, got float 2.5"):
        stream.launch(K.fill, 1, 4, x, 1, 2.5)


# One set of rules for Python and NumPy numbers


def _flags(launch, out, b, i, u, f):
    out[:4] = [int(b), int(i), int(u), int(f * np.float32(4))]


FLAGS = gg.Kernel(r"""
__global__ void flags(int* out, bool b, int i, unsigned u, float f){
    out[0] = b; out[1] = i; out[2] = (int)u; out[3] = (int)(f * 4.0f);
}""", "flags", cpu=_flags)


@pytest.mark.parametrize("index, python, numpy, exc, match", [
    (2, 8.5, np.float32(8.5), TypeError, r"argument 2 \(int i\): expects an integer, got float"),
    (2, float("nan"), np.float64("nan"), TypeError, r"argument 2 \(int i\): expects an integer, got float"),
    (2, float("inf"), np.float16("inf"), TypeError, r"argument 2 \(int i\): expects an integer, got float"),
    (2, 2**40, np.int64(2**40), ValueError,
     r"argument 2 \(int i\): (np\.int64\()?1099511627776\)? does not fit in int \(-2147483648\.\.2147483647\)$"),
    (3, -1, np.int64(-1), ValueError, (r"argument 3 \(unsigned u\): (np\.int64\()?-1\)? does not fit in unsigned "
                                       r"\(0\.\.4294967295\)$")),
    (3, 2**32, np.uint64(2**32), ValueError, r"argument 3 \(unsigned u\): .*4294967296\)? does not fit in unsigned"),
    (4, 1e300, np.float64(1e300), ValueError, (r"argument 4 \(float f\): (np\.float64\()?1e\+300\)? does not fit "
                                               r"in float \(\|x\| <= 3\.40282e\+38\)$")),
    (4, 10**39, np.longdouble(1e39), ValueError, r"argument 4 \(float f\): .* does not fit in float"),
    (4, 1 + 2j, np.complex64(1 + 2j), TypeError, r"argument 4 \(float f\): expects a C float scalar, got complex"),
    (2, 1 + 0j, np.complex128(1), TypeError, r"argument 2 \(int i\): expects a C int scalar, got complex"),
    (1, 2, np.int32(2), ValueError, r"argument 1 \(bool b\): (np\.int32\()?2\)? does not fit in bool \(0\.\.1\)$"),
    (1, 0.5, np.float16(0.5), TypeError, r"argument 1 \(bool b\): expects an integer, got float"),
    (2, "3", np.str_("3"), TypeError, r"argument 2 \(int i\): expects a C int scalar, got str"),
    (2, None, np.datetime64(3, "s"), TypeError, r"argument 2 \(int i\): expects a C int scalar, got"),
])
def test_numpy_scalars_follow_the_rules_of_python_numbers(device, stream, index, python, numpy, exc, match):
    out = device.zeros(4, np.int32)
    args = [out, True, 1, 2, 3.0]
    for value in (python, numpy):
        args[index] = value
        with pytest.raises(exc, match=match):
            stream.launch(FLAGS, 1, 1, *args)
        with pytest.raises(exc, match=match):
            gg.Graph(device).add_kernel(FLAGS, 1, 1, *args)


@pytest.mark.parametrize("args, expected", [
    ((True, 8, 7, 2.5), [1, 8, 7, 10]),
    ((np.True_, np.float32(8.0), np.int64(7), np.float64(2.5)), [1, 8, 7, 10]),
    ((1, 8.0, np.uint8(7), np.float16(2.5)), [1, 8, 7, 10]),
    ((np.int8(0), np.True_, True, np.int32(3)), [0, 1, 1, 12]),
    ((0.0, False, np.bool_(True), np.longdouble(0.25)), [0, 0, 1, 1]),
])
def test_numbers_that_fit_are_passed_as_the_c_type(device, stream, args, expected):
    """Bools are the integers 0 and 1 (as in C), integral floats are integers, Python or NumPy alike."""
    out = device.zeros(4, np.int32)
    stream.launch(FLAGS, 1, 1, out, *args)
    g = gg.Graph(device)
    node = g.add_kernel(FLAGS, 1, 1, out, *args)
    assert [type(a) for a in node.params.args[1:]] == [np.bool_, np.int32, np.uint32, np.float32]
    stream.synchronize()
    np.testing.assert_array_equal(out.to_numpy(), expected)
    out2 = device.zeros(4, np.int32)
    exe = g.instantiate()
    exe.set_params(node, out2, *args)
    exe.launch(stream)
    stream.synchronize()
    np.testing.assert_array_equal(out2.to_numpy(), expected)


def test_inf_and_nan_fit_a_floating_parameter(device):
    g = gg.Graph(device)
    out = device.zeros(4, np.int32)
    for value in (float("inf"), np.float64("-inf"), float("nan"), np.float32("nan")):
        f = g.add_kernel(FLAGS, 1, 1, out, True, 1, 2, value).params.args[4]
        assert type(f) is np.float32 and (np.isnan(f) if np.isnan(value) else f == value)


def test_a_0d_array_is_not_a_scalar(device, stream):
    with pytest.raises(TypeError, match=r"argument 2 \(int i\): expects a C int scalar, got ndarray array\(3\) \(a 0-d "
                                        r"array: pass arr\[\(\)\] or arr\.item\(\)\)$"):
        stream.launch(FLAGS, 1, 1, device.zeros(4, np.int32), True, np.array(3), 2, 3.0)


def test_numpy_array_for_pointer_raises_with_hint(device, stream):
    with pytest.raises(TypeError, match=r"argument 0 \(float\* x\): expects a device Array, got ndarray.*asarray"):
        stream.launch(K.scale, 1, 4, np.zeros(4, np.float32), 2.0, 4)


@pytest.mark.parametrize("bad", [None, 3, "x"])
def test_non_array_for_pointer_raises_type_error(device, stream, bad):
    with pytest.raises(TypeError, match=r"argument 0 \(float\* x\): expects a device Array"):
        stream.launch(K.scale, 1, 4, bad, 2.0, 4)


def test_dtype_mismatch_for_typed_pointer(device, stream):
    with pytest.raises(TypeError, match=r"argument 0 \(float\* x\): expects float32 data, got an Array of float64"):
        stream.launch(K.scale, 1, 4, device.zeros(4, np.float64), 2.0, 4)
    with pytest.raises(TypeError, match=r"argument 1 \(const int\* arrayB|argument 1 \(int\* arrayB\)"):
        g = gg.Graph(device)
        kc = gg.Kernel(K.SEED_SOURCE, "kernelC", cpu=lambda *a: None)
        g.add_kernel(kc, 1, 4, device.zeros(4, np.float64), device.zeros(4, np.int64), 4)


def test_untyped_pointer_accepts_any_dtype(device, stream):
    assert params(K.SOURCE, "zero_bytes")[0] == ("x", "void*", True, None)
    a = device.asarray(np.full(4, -1, np.int16))
    b = device.asarray(np.full(2, -1.0, np.float64))
    stream.launch(K.zero_bytes, 1, 32, a, 6)      # the first 3 int16
    stream.launch(K.zero_bytes, 1, 32, b, 16)     # both float64
    stream.synchronize()
    np.testing.assert_array_equal(a.to_numpy(), [0, 0, 0, -1])
    np.testing.assert_array_equal(b.to_numpy(), [0.0, 0.0])


# A kernel made by a macro: gpugraph cannot read its signature from the source.
MACRO_SOURCE = r"""
#define MAKE_FILL(NAME) extern "C" __global__ void NAME(int* x, int v){ x[threadIdx.x] = v; }
MAKE_FILL(opaque)
"""


def _opaque(launch, x, v):
    x[:launch.block[0]] = v


def test_kernel_without_signature_takes_only_arrays_and_numpy_scalars(device, stream):
    k = gg.Kernel(MACRO_SOURCE, "opaque", cpu=_opaque)
    assert k.signature is None
    x = device.zeros(4, np.int32)
    with pytest.raises(TypeError, match=r"argument 1: gpugraph cannot read `__global__ void opaque\(...\)` from the "
                                        r"source \(not found, or macros decide its parameters\).*got int"):
        stream.launch(k, 1, 2, x, 3)
    stream.launch(k, 1, 2, x, np.int32(3))
    stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), [3, 3, 0, 0])


@pytest.mark.parametrize("bad", [np.complex64(1), np.longdouble(1), np.str_("1"), np.datetime64(1, "s")])
def test_kernel_without_signature_takes_numpy_scalars_of_c_number_types_only(device, stream, bad):
    k = gg.Kernel(MACRO_SOURCE, "opaque", cpu=_opaque)
    with pytest.raises(TypeError, match=r"^Kernel\('opaque'\) argument 1: expects a NumPy bool, integer or floating "
                                        r"scalar of at most 8 bytes \(a C number type\), got"):
        stream.launch(k, 1, 2, device.zeros(4, np.int32), bad)


def _unsettled(launch, x, v, n):
    x[:K.covered(launch, n)] = v


# A parameter whose type the reader cannot settle (a typedef under #if): the argument's own type is used.
UNSETTLED = gg.Kernel(r"""
#ifdef WIDE
typedef long long count_t;
#else
typedef int count_t;
#endif
__global__ void unsettled(int* x, count_t v, int n){
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if(i < n){x[i] = (int)v;}
}""", "unsettled", cpu=_unsettled)


def test_a_parameter_of_unsettled_type_takes_numpy_scalars(device, stream):
    assert UNSETTLED.signature[1].dtype is None
    x = device.zeros(4, np.int32)
    with pytest.raises(TypeError, match=r"^Kernel\('unsettled'\) argument 1 \(count_t v\): gpugraph cannot tell the C "
                                        r"type 'count_t'; pass a NumPy scalar of the right type, got int 5$"):
        stream.launch(UNSETTLED, 1, 4, x, 5, 4)
    with pytest.raises(TypeError, match=r"argument 1 \(count_t v\): expects a NumPy bool, integer or floating"):
        stream.launch(UNSETTLED, 1, 4, x, np.complex64(5), 4)
    stream.launch(UNSETTLED, 1, 4, x, np.int32(5), 3)
    g = gg.Graph(device)
    g.add_kernel(UNSETTLED, 1, 4, x, np.int32(6), 2)
    with g.instantiate() as exe:
        exe.launch(stream)
    stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), [6, 6, 5, 0])


@pytest.mark.parametrize("count", [0, 2, 4])
def test_wrong_argument_count(device, stream, count):
    args = (device.zeros(4, np.float32), 2.0, 4, 5)[:count]
    with pytest.raises(TypeError,
                       match=rf"Kernel\('scale'\) takes 3 arguments \(float\* x, float f, int n\), got {count}"):
        stream.launch(K.scale, 1, 4, *args)


def test_launch_rejects_non_kernel(device, stream):
    with pytest.raises(TypeError, match="launch\\(kernel\\): expected a Kernel, got str"):
        stream.launch("scale", 1, 1)


# Launch shapes


@pytest.mark.parametrize("grid, block, exc, match", [
    (1, 1025, ValueError, "block: dimension x must be in 1..1024, got 1025"),
    (1, (32, 32, 2), ValueError, r"block: \(32, 32, 2\) has 2048 threads; a block holds at most 1024"),
    (1, (1, 1, 65), ValueError, "block: dimension z must be in 1..64"),
    (1, 0, ValueError, "block: dimension x must be in 1..1024, got 0"),
    (0, 1, ValueError, "grid: dimension x must be in"),
    ((1, 65536), 1, ValueError, "grid: dimension y must be in 1..65535"),
    ((1, 1, 1, 1), 1, ValueError, "grid: expected 1 to 3 dimensions, got 4"),
    ((), 1, ValueError, "grid: expected 1 to 3 dimensions, got 0"),
    ("a", 1, TypeError, "grid: expected an int or a tuple of 1 to 3 ints"),
    (1.5, 1, TypeError, "grid: expected an int or a tuple"),
    (1, (2.0, 1), TypeError, "block: expected an int or a tuple"),
    (True, 1, TypeError, "grid: expected an int or a tuple of 1 to 3 ints, got True"),
    (np.True_, 1, TypeError, "grid: expected an int or a tuple of 1 to 3 ints"),
    (1, (4, True), TypeError, "block: expected an int or a tuple"),
])
def test_bad_launch_shape(device, stream, grid, block, exc, match):
    x = device.zeros(4, np.float32)
    with pytest.raises(exc, match=match):
        stream.launch(K.scale, grid, block, x, 2.0, 4)
    g = gg.Graph(device)
    with pytest.raises(exc, match=match):
        g.add_kernel(K.scale, grid, block, x, 2.0, 4)
    assert len(g) == 0


def test_float_grid_rejected_even_after_equal_int_grid(device, stream):
    """A float grid is refused even right after an equal int grid was accepted (4.0 after 4)."""
    x = device.zeros(16, np.float32)
    stream.launch(K.scale, 4, 4, x, 2.0, 16)
    stream.synchronize()
    with pytest.raises(TypeError, match="grid: expected an int or a tuple"):
        stream.launch(K.scale, 4.0, 4, x, 2.0, 16)
    stream.synchronize()


@pytest.mark.parametrize("value", [-1, None, 0.0, False, "0"])
def test_shared_mem_other_than_a_non_negative_int_rejected(device, stream, value):
    with pytest.raises(ValueError, match=f"shared_mem: expected a non-negative int, got {value!r}"):
        stream.launch(K.scale, 1, 1, device.zeros(1, np.float32), 2.0, 1, shared_mem=value)


def test_max_block_of_1024_threads_is_fine(device, stream):
    x = device.zeros(2048, np.int32)
    stream.launch(K.fill, 2, (1024, 1, 1), x, 5, 2048)
    stream.launch(K.fill, 1, (32, 32), x, 6, 1024)   # a 1-D kernel: only the 32 x-threads index distinctly
    stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), [6] * 32 + [5] * 2016)


# The CPU implementation contract


def test_cpu_implementation_receives_3_tuples_and_views(device, stream):
    seen = []

    def record(launch, x, f, n):
        seen.append((launch.grid, launch.block, launch.shared_mem, type(x), x.dtype, x.shape, type(f), type(n)))

    k = gg.Kernel(K.SOURCE, "scale", cpu=record)
    if device.backend != "cpu":
        pytest.skip("the cpu implementation only runs on the cpu backend")
    stream.launch(k, (2, 3), 4, device.zeros((2, 3), np.float32), 1.5, 6, shared_mem=128)
    stream.synchronize()
    assert seen == [((2, 3, 1), (4, 1, 1), 128, np.ndarray, np.dtype(np.float32), (2, 3), np.float32, np.int32)]


def test_launch_honours_grid_and_block_bounds(device, stream):
    x = device.asarray(np.ones(10, np.float32))
    stream.launch(K.scale, 1, 4, x, 3.0, 10)       # 4 threads: elements 0..3
    stream.launch(K.scale, 2, 4, x, 2.0, 10)       # 8 threads: elements 0..7
    stream.launch(K.scale, 4, 4, x, 5.0, 9)        # 16 threads, bounds check at 9
    stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), [30, 30, 30, 30, 10, 10, 10, 10, 5, 1])


def test_two_dimensional_launch(device, stream):
    out = device.zeros((5, 7), np.int32)
    stream.launch(K.iota2d, (2, 2), (4, 2), out, 7, 5)   # covers 8 x 4 threads, bounded to 7 x 4
    stream.synchronize()
    expected = np.zeros((5, 7), np.int32)
    for y in range(4):
        for x in range(7):
            expected[y, x] = y * 1000 + x
    np.testing.assert_array_equal(out.to_numpy(), expected)


def test_a_kernel_without_cpu_implementation_runs_its_source_on_every_backend(device, stream):
    k = gg.Kernel(K.SOURCE, "scale")  # (no cpu=: the CPU backend compiles the source)
    x = device.asarray(np.arange(4, dtype=np.float32))
    stream.launch(k, 1, 4, x, 2.0, 4)
    g = gg.Graph(device)
    g.add_kernel(k, 1, 4, x, 2.0, 4)
    g.instantiate().launch(stream)
    stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), np.arange(4) * 4.0)


def test_same_kernel_object_on_many_launches(device, stream):
    x = device.zeros(8, np.float64)
    for _ in range(5):
        stream.launch(K.inc, *K.launch_1d(8, 4), x, 8)
    stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), np.full(8, 5.0))


@pytest.mark.gpu
def test_compile_error_carries_the_log(gpu_device):
    k = gg.Kernel("__global__ void broken(float* x){ x[0] = undefined_name; }", "broken")
    s = gpu_device.stream()
    with pytest.raises(gg.KernelCompileError, match="broken") as info:
        s.launch(k, 1, 1, gpu_device.zeros(1, np.float32))
    assert "undefined_name" in info.value.log
