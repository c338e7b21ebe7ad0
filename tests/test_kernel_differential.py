"""Differential tests of compiled kernels: hypothesis writes random element-wise and reduction kernels in CUDA C++,
runs them on every backend and checks each result against NumPy; where CUDA is present, the CPU backend's results
are checked against CUDA's too (integers bit for bit, floats within 1 ulp).

Element-wise kernels are expression trees over four inputs and the element's index: unsigned 32-bit integer
arithmetic (wrapping, as in C and NumPy) or float32 arithmetic with the operations IEEE rounds correctly (+ - * /,
sqrtf, fmaf, fminf, fmaxf, fabsf, comparisons). Kernels are compiled with -fmad=false, so CUDA contracts nothing,
as the CPU backend never does. Reduction kernels are shared-memory tree reductions with __syncthreads, one partial
result per block, plus atomic reductions of integers into one word.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpugraph as gg

OPTIONS = ("-fmad=false",)
INPUTS = 4
FLOAT_CONSTANTS = (0.5, 1.5, -2.0, 3.25, 1e-3, 1e3)
INT_CONSTANTS = (1, 3, 7, 0x9E3779B9, 0xFFFFFFFF)

# An expression: (C text, NumPy function of (inputs, index)). Inputs are x0..x3; the index is i.
Expression = tuple[str, object]


def _leaf(kind: str) -> st.SearchStrategy[Expression]:
    inputs = st.integers(0, INPUTS - 1).map(lambda k: (f"x{k}[i]", lambda xs, i, k=k: xs[k]))
    if kind == "float":
        constants = st.sampled_from(FLOAT_CONSTANTS).map(
            lambda c: (f"{c!r}f", lambda xs, i, c=c: np.float32(c)))
        index = st.just(("(float)i", lambda xs, i: i.astype(np.float32)))
    else:
        constants = st.sampled_from(INT_CONSTANTS).map(lambda c: (f"{c}u", lambda xs, i, c=c: np.uint32(c)))
        index = st.just(("(unsigned)i", lambda xs, i: i.astype(np.uint32)))
    return st.one_of(inputs, constants, index)


def _float_node(children: st.SearchStrategy[Expression]) -> st.SearchStrategy[Expression]:
    binary = {
        "+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide,
    }
    functions = {"fminf": np.fmin, "fmaxf": np.fmax}
    unary = {"sqrtf": np.sqrt, "fabsf": np.abs, "-": np.negative}
    return st.one_of(
        st.tuples(st.sampled_from(sorted(binary)), children, children).map(
            lambda t: (f"({t[1][0]} {t[0]} {t[2][0]})",
                       lambda xs, i, t=t: binary[t[0]](t[1][1](xs, i), t[2][1](xs, i)))),
        st.tuples(st.sampled_from(sorted(functions)), children, children).map(
            lambda t: (f"{t[0]}({t[1][0]}, {t[2][0]})",
                       lambda xs, i, t=t: functions[t[0]](t[1][1](xs, i), t[2][1](xs, i)))),
        st.tuples(st.sampled_from(sorted(unary)), children).map(
            lambda t: (f"{t[0]}({t[1][0]})", lambda xs, i, t=t: unary[t[0]](t[1][1](xs, i)))),
        st.tuples(children, children, children).map(
            lambda t: (f"fmaf({t[0][0]}, {t[1][0]}, {t[2][0]})",
                       lambda xs, i, t=t: _fma(t[0][1](xs, i), t[1][1](xs, i), t[2][1](xs, i)))),
        st.tuples(children, children, children, children).map(
            lambda t: (f"({t[0][0]} < {t[1][0]} ? {t[2][0]} : {t[3][0]})",
                       lambda xs, i, t=t: np.where(t[0][1](xs, i) < t[1][1](xs, i), t[2][1](xs, i),
                                                   t[3][1](xs, i)))),
    )


def _int_node(children: st.SearchStrategy[Expression]) -> st.SearchStrategy[Expression]:
    binary = {"+": np.add, "-": np.subtract, "*": np.multiply, "&": np.bitwise_and, "|": np.bitwise_or,
              "^": np.bitwise_xor}
    return st.one_of(
        st.tuples(st.sampled_from(sorted(binary)), children, children).map(
            lambda t: (f"({t[1][0]} {t[0]} {t[2][0]})",
                       lambda xs, i, t=t: binary[t[0]](t[1][1](xs, i), t[2][1](xs, i)))),
        st.tuples(st.sampled_from(["<<", ">>"]), children, children).map(
            lambda t: (f"({t[1][0]} {t[0]} ({t[2][0]} & 31u))",
                       lambda xs, i, t=t: (np.left_shift if t[0] == "<<" else np.right_shift)(
                           t[1][1](xs, i), t[2][1](xs, i) & np.uint32(31)))),
        st.tuples(st.sampled_from(["/", "%"]), children, children).map(
            lambda t: (f"({t[1][0]} {t[0]} ({t[2][0]} | 1u))",
                       lambda xs, i, t=t: (np.floor_divide if t[0] == "/" else np.remainder)(
                           t[1][1](xs, i), t[2][1](xs, i) | np.uint32(1)))),
        st.tuples(st.sampled_from(["min", "max"]), children, children).map(
            lambda t: (f"{t[0]}({t[1][0]}, {t[2][0]})",
                       lambda xs, i, t=t: (np.minimum if t[0] == "min" else np.maximum)(
                           t[1][1](xs, i), t[2][1](xs, i)))),
    )


def _fma(a, b, c):
    """fmaf in NumPy: the product is exact in float64 and the sum rounds once there, then again to float32 (a
    double rounding that may differ from fmaf by 1 ulp: the comparison with NumPy allows it)."""
    return (np.asarray(a, np.float64) * np.asarray(b, np.float64) + np.asarray(c, np.float64)).astype(np.float32)


def expressions(kind: str) -> st.SearchStrategy[Expression]:
    node = _float_node if kind == "float" else _int_node
    return st.recursive(_leaf(kind), node, max_leaves=12)


def element_wise_source(kind: str, bodies: list[str]) -> str:
    t = "float" if kind == "float" else "unsigned"
    kernels = "".join(
        f"extern \"C\" __global__ void k{j}({t}* out, const {t}* x0, const {t}* x1, const {t}* x2, const {t}* x3, "
        f"int n) {{\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) out[i] = {body};\n}}\n"
        for j, body in enumerate(bodies))
    return kernels


def ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The distance between float32 values in units in the last place (NaNs equal to each other, -0 to +0)."""
    def ordered(v: np.ndarray) -> np.ndarray:
        bits = v.astype(np.float32).view(np.int32).astype(np.int64)
        return np.where(bits < 0, np.int64(-0x80000000) - bits, bits)
    both_nan = np.isnan(a) & np.isnan(b)
    one_nan = np.isnan(a) ^ np.isnan(b)
    distance = np.abs(ordered(a) - ordered(b))
    return np.where(both_nan, 0, np.where(one_nan, np.iinfo(np.int64).max, distance))


def inputs(kind: str, n: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    if kind == "float":
        return [(rng.standard_normal(n) * rng.choice([1e-3, 1.0, 1e3], n)).astype(np.float32) for _ in range(INPUTS)]
    return [rng.integers(0, 1 << 32, n, dtype=np.uint32) for _ in range(INPUTS)]


def run_element_wise(device: gg.Device, kind: str, source: str, count: int, xs: list[np.ndarray],
                     block: int) -> list[np.ndarray]:
    n = len(xs[0])
    stream = device.stream()
    arrays = [device.asarray(x) for x in xs]
    outs = []
    for j in range(count):
        out = device.zeros(n, xs[0].dtype)
        stream.launch(gg.Kernel(source, f"k{j}", options=OPTIONS), (n + block - 1) // block, block, out, *arrays, n)
        outs.append(out)
    stream.synchronize()
    return [out.to_numpy() for out in outs]


def reference(expression: Expression, xs: list[np.ndarray]) -> np.ndarray:
    with np.errstate(all="ignore"):
        value = expression[1](xs, np.arange(len(xs[0])))
    return np.broadcast_to(np.asarray(value, dtype=xs[0].dtype), xs[0].shape)


def check_equal(kind: str, got: np.ndarray, want: np.ndarray, source: str, allowed_ulps: int) -> None:
    if kind == "int":
        np.testing.assert_array_equal(got, want, err_msg=source)
    else:
        worst = int(ulps(got, want).max())
        assert worst <= allowed_ulps, f"{worst} ulp apart (allowed {allowed_ulps}):\n{source}"


element_wise = st.sampled_from(["float", "int"]).flatmap(
    lambda kind: st.tuples(st.just(kind), st.lists(expressions(kind), min_size=1, max_size=6),
                           st.integers(1, 3000), st.sampled_from([32, 128, 256]), st.integers(0, 2 ** 32 - 1)))
SETTINGS = settings(max_examples=30, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@SETTINGS
@given(case=element_wise)
def test_random_element_wise_kernels_match_numpy(device, case):
    kind, exprs, n, block, seed = case
    source = element_wise_source(kind, [e[0] for e in exprs])
    xs = inputs(kind, n, seed)
    for expression, got in zip(exprs, run_element_wise(device, kind, source, len(exprs), xs, block)):
        # fmaf's NumPy model may round twice (1 ulp); IEEE's other operations are exact on every backend.
        check_equal(kind, got, reference(expression, xs), source, 1 if "fmaf" in expression[0] else 0)


# A reduction: (C type, C operation of a and b, its identity, NumPy's operation, the atomic function or None).
REDUCTIONS = {
    "sum_u32": ("unsigned", "a + b", "0u", np.add, "atomicAdd"),
    "max_i32": ("int", "max(a, b)", "-2147483647 - 1", np.maximum, "atomicMax"),
    "min_u32": ("unsigned", "min(a, b)", "0xFFFFFFFFu", np.minimum, "atomicMin"),
    "xor_u32": ("unsigned", "a ^ b", "0u", np.bitwise_xor, "atomicXor"),
    "or_u32": ("unsigned", "a | b", "0u", np.bitwise_or, "atomicOr"),
    "sum_f32": ("float", "a + b", "0.0f", np.add, None),
    "max_f32": ("float", "fmaxf(a, b)", "-__int_as_float(0x7f800000)", np.fmax, None),
    "sum_f64": ("double", "a + b", "0.0", np.add, None),
}
IDENTITIES = {"0u": 0, "0.0f": 0.0, "0.0": 0.0, "0xFFFFFFFFu": 0xFFFFFFFF, "-__int_as_float(0x7f800000)": -np.inf,
              "-2147483647 - 1": -2 ** 31}
DTYPES = {"unsigned": np.uint32, "int": np.int32, "float": np.float32, "double": np.float64}


def reduction_source(name: str) -> str:
    t, op, identity, _np_op, atomic = REDUCTIONS[name]
    tree = f"""
__device__ {t} combine({t} a, {t} b) {{ return {op}; }}
extern "C" __global__ void tree(const {t}* in, {t}* partial, int n) {{
    extern __shared__ {t} buffer[];
    const unsigned t = threadIdx.x;
    const int i = blockIdx.x * blockDim.x + t;
    buffer[t] = i < n ? in[i] : {identity};
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {{
        if (t < s) buffer[t] = combine(buffer[t], buffer[t + s]);
        __syncthreads();
    }}
    if (t == 0) partial[blockIdx.x] = buffer[0];
}}
"""
    if atomic is not None:
        tree += f"""
extern "C" __global__ void atomic(const {t}* in, {t}* total, int n) {{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {atomic}(total, in[i]);
}}
"""
    return tree


def tree_reference(name: str, values: np.ndarray, block: int) -> np.ndarray:
    """The tree's per-block results in the kernel's order of operations."""
    t, _op, identity, np_op, _atomic = REDUCTIONS[name]
    dtype = DTYPES[t]
    blocks = (len(values) + block - 1) // block
    buffer = np.full(blocks * block, IDENTITIES[identity], dtype=dtype)
    buffer[:len(values)] = values
    buffer = buffer.reshape(blocks, block)
    s = block // 2
    while s > 0:
        buffer[:, :s] = np_op(buffer[:, :s], buffer[:, s:2 * s])
        s //= 2
    return buffer[:, 0].copy()


def reduction_inputs(name: str, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    dtype = DTYPES[REDUCTIONS[name][0]]
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    return (rng.standard_normal(n) * 100).astype(dtype)


def run_reduction(device: gg.Device, name: str, values: np.ndarray, block: int) -> tuple[np.ndarray, object]:
    _type, _op, identity, _np_op, atomic = REDUCTIONS[name]
    source, n = reduction_source(name), len(values)
    blocks = (n + block - 1) // block
    stream = device.stream()
    data, partial = device.asarray(values), device.zeros(blocks, values.dtype)
    stream.launch(gg.Kernel(source, "tree", options=OPTIONS), blocks, block, data, partial, n,
                  shared_mem=block * values.itemsize)
    total = None
    if atomic is not None:
        total = device.asarray(np.array([IDENTITIES[identity]], dtype=values.dtype))
        stream.launch(gg.Kernel(source, "atomic", options=OPTIONS), blocks, block, data, total, n)
    stream.synchronize()
    return partial.to_numpy(), (None if total is None else total.to_numpy()[0])


reductions = st.tuples(st.sampled_from(sorted(REDUCTIONS)), st.integers(1, 5000),
                       st.sampled_from([2, 32, 64, 256, 512]), st.integers(0, 2 ** 32 - 1))


@SETTINGS
@given(case=reductions)
def test_random_reductions_match_numpy(device, case):
    name, n, block, seed = case
    values = reduction_inputs(name, n, seed)
    partial, total = run_reduction(device, name, values, block)
    np.testing.assert_array_equal(partial, tree_reference(name, values, block), err_msg=reduction_source(name))
    if total is not None:
        np_op = REDUCTIONS[name][3]
        assert total == np_op.reduce(values, dtype=values.dtype), (name, total)


needs_cuda = pytest.mark.skipif("cuda" not in gg.available_backends(), reason="needs the CUDA backend beside the CPU")


@needs_cuda
@SETTINGS
@given(case=element_wise)
def test_cpu_and_cuda_agree_on_random_element_wise_kernels(case):
    """Integers bit for bit; floats within 1 ulp (the two backends round IEEE's operations the same way)."""
    kind, exprs, n, block, seed = case
    source = element_wise_source(kind, [e[0] for e in exprs])
    xs = inputs(kind, n, seed)
    on_cpu = run_element_wise(gg.Device("cpu"), kind, source, len(exprs), xs, block)
    on_cuda = run_element_wise(gg.Device("cuda"), kind, source, len(exprs), xs, block)
    for got_cpu, got_cuda in zip(on_cpu, on_cuda):
        check_equal(kind, got_cpu, got_cuda, source, 1)


@needs_cuda
@SETTINGS
@given(case=reductions)
def test_cpu_and_cuda_agree_on_random_reductions(case):
    name, n, block, seed = case
    values = reduction_inputs(name, n, seed)
    cpu_partial, cpu_total = run_reduction(gg.Device("cpu"), name, values, block)
    cuda_partial, cuda_total = run_reduction(gg.Device("cuda"), name, values, block)
    np.testing.assert_array_equal(cpu_partial, cuda_partial)
    assert cpu_total == cuda_total


# Single-precision functions with CUDA's documented maximum error (CUDA C++ Programming Guide, "Mathematical
# Functions": ulps, full range), the host's libm being within 1 ulp: the two backends may be this far apart + 1.
MATH_FUNCTIONS = {"sinf": 2, "cosf": 2, "tanf": 4, "expf": 2, "exp2f": 2, "logf": 1, "log2f": 1, "log1pf": 1,
                  "tanhf": 2, "atanf": 2, "erff": 2, "cbrtf": 1, "sinpif": 1, "cospif": 1, "rsqrtf": 2}
# Double-precision functions: CUDA's documented maximum error in ulps, and the host's (glibc's libm-test-ulps for
# x86_64; for sinpi, gpugraph's header computing sin(pi t) after an exact reduction). cbrt measured 3 ulp apart on
# an H200's host (2026-11-24): glibc's cbrt is within 4.
DOUBLE_FUNCTIONS = {"sin": (2, 1), "cos": (2, 1), "exp": (1, 1), "log": (1, 1), "tanh": (2, 3), "erf": (2, 1),
                    "sinpi": (2, 2), "cbrt": (1, 4)}


def on_cpu_and_cuda(function: str, x: np.ndarray) -> list[np.ndarray]:
    """``function`` applied to each element of ``x`` by a kernel, on the CPU backend and on CUDA."""
    ctype = "float" if x.dtype == np.float32 else "double"
    source = (f"__global__ void f(const {ctype}* x, {ctype}* y, int n) {{ int i = blockIdx.x * blockDim.x + "
              f"threadIdx.x; if (i < n) y[i] = {function}(x[i]); }}")
    results = []
    for backend in ("cpu", "cuda"):
        device = gg.Device(backend)
        y = device.zeros(len(x), x.dtype)
        stream = device.stream()
        stream.launch(gg.Kernel(source, "f"), len(x) // 256, 256, device.asarray(x), y, len(x))
        stream.synchronize()
        results.append(y.to_numpy())
    return results


def spread(seed: int) -> np.ndarray:
    """2^16 values over both signs and magnitudes from 1e-6 to 1e4."""
    rng = np.random.default_rng(seed)
    return rng.choice([-1.0, 1.0], 1 << 16) * 10.0 ** rng.uniform(-6, 4, 1 << 16)


@needs_cuda
@pytest.mark.parametrize("function", sorted(MATH_FUNCTIONS))
def test_cpu_and_cuda_math_functions_agree_within_cudas_error_bounds(function):
    """Beyond the correctly rounded operations of the random kernels: each function on 2^16 inputs spread over
    signs and magnitudes, the CPU backend's result within CUDA's documented error of the GPU's."""
    x = spread(11).astype(np.float32)
    if function in ("logf", "log2f", "rsqrtf", "cbrtf"):
        x = np.abs(x)
    if function == "log1pf":
        x = np.maximum(x, np.float32(-0.999))
    on_cpu, on_cuda = on_cpu_and_cuda(function, x)
    worst = int(ulps(on_cpu, on_cuda).max())
    assert worst <= MATH_FUNCTIONS[function] + 1, (function, worst)


@needs_cuda
@pytest.mark.parametrize("function", sorted(DOUBLE_FUNCTIONS))
def test_cpu_and_cuda_double_functions_agree_within_cudas_error_bounds(function):
    x = spread(12)
    if function == "log":
        x = np.abs(x)
    results = on_cpu_and_cuda(function, x)
    ordered = [np.where(v.view(np.int64) < 0, np.int64(-2**63) - v.view(np.int64), v.view(np.int64)) for v in results]
    worst = int(np.abs(ordered[0] - ordered[1]).max())
    assert worst <= sum(DOUBLE_FUNCTIONS[function]), (function, worst)
