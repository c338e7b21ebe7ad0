"""The CUDA/HIP kernel language on every backend: one source, no Python twin. On the CPU backend the source is
compiled with the machine's C++ compiler (gpugraph.backends.cpu._compile); on CUDA with NVRTC. Each test checks
the kernel's results against NumPy."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pytest

import gpugraph as gg
from gpugraph.backends.cpu import _compile, _load


def run(stream, kernel, grid, block, *args, shared_mem=0):
    stream.launch(kernel, grid, block, *args, shared_mem=shared_mem)
    stream.synchronize()


QUALIFIERS = r"""
__device__ __forceinline__ float twice(float v) { return 2.0f * v; }
__host__ __device__ inline float plus_one(float v) { return v + 1.0f; }
extern "C" __global__ void __launch_bounds__(256) apply(const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = plus_one(twice(x[i]));
}
"""


def test_qualifiers_helpers_and_extern_c(device, stream):
    n = 1000
    x = device.asarray(np.linspace(-3, 3, n, dtype=np.float32))
    y = device.zeros(n, np.float32)
    run(stream, gg.Kernel(QUALIFIERS, "apply"), (n + 255) // 256, 256, x, y, n)
    np.testing.assert_array_equal(y.to_numpy(), 2 * x.to_numpy() + 1)


TEMPLATES = r"""
template <typename T>
__global__ void axpb(T a, const T* x, T b, T* y, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + b;
}
"""


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_a_template_kernel_is_named_by_its_name_expression(device, stream, dtype):
    ctype = {np.float32: "float", np.float64: "double", np.int32: "int"}[dtype]
    kernel = gg.Kernel(TEMPLATES, f"axpb<{ctype}>")
    assert [p.dtype for p in kernel.signature] == [np.dtype(dtype), np.dtype(dtype), np.dtype(dtype),
                                                   np.dtype(dtype), np.dtype(np.uint32)]
    n = 300
    x = device.asarray(np.arange(n, dtype=dtype))
    y = device.zeros(n, dtype)
    run(stream, kernel, 2, 256, 3, x, 5, y, n)  # (Python ints, typed by the instance's parameters)
    np.testing.assert_array_equal(y.to_numpy(), 3 * np.arange(n, dtype=dtype) + 5)


def test_a_name_that_is_not_an_identifier_or_name_expression_is_refused():
    with pytest.raises(TypeError, match=r"name expression.*got 'axpb double'"):
        gg.Kernel(TEMPLATES, "axpb double")


BUILTINS = r"""
__global__ void where(unsigned* out) {
    dim3 g = gridDim, b = blockDim;
    unsigned block = blockIdx.x + g.x * (blockIdx.y + g.y * blockIdx.z);
    unsigned thread = threadIdx.x + b.x * (threadIdx.y + b.y * threadIdx.z);
    unsigned i = block * (b.x * b.y * b.z) + thread;
    out[4 * i] = blockIdx.x + 10 * blockIdx.y + 100 * blockIdx.z;
    out[4 * i + 1] = threadIdx.x + 10 * threadIdx.y + 100 * threadIdx.z;
    out[4 * i + 2] = warpSize;
    out[4 * i + 3] = g.x * g.y * g.z * b.x * b.y * b.z;
}
"""


def test_built_in_variables_in_three_dimensions(device, stream):
    grid, block = (2, 3, 2), (4, 2, 3)
    total = 12 * 24
    out = device.zeros(4 * total, np.uint32)
    run(stream, gg.Kernel(BUILTINS, "where"), grid, block, out)
    got = out.to_numpy().reshape(total, 4)
    expected = []
    for bz in range(2):
        for by in range(3):
            for bx in range(2):
                for tz in range(3):
                    for ty in range(2):
                        for tx in range(4):
                            expected.append((bx + 10 * by + 100 * bz, tx + 10 * ty + 100 * tz, 32, total))
    np.testing.assert_array_equal(got, np.array(expected, np.uint32))


REDUCE = r"""
__global__ void block_sums(const float* x, float* sums, int n) {
    __shared__ float partial[256];
    unsigned t = threadIdx.x;
    unsigned i = blockIdx.x * blockDim.x + t;
    partial[t] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (unsigned stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (t < stride) partial[t] += partial[t + stride];
        __syncthreads();
    }
    if (t == 0) sums[blockIdx.x] = partial[0];
}
"""


def test_a_shared_memory_tree_reduction_with_syncthreads(device, stream):
    n, block = 10_000, 256
    grid = (n + block - 1) // block
    values = np.arange(n, dtype=np.float32) % 7  # (small integers: every order of summing gives the same)
    x, sums = device.asarray(values), device.zeros(grid, np.float32)
    run(stream, gg.Kernel(REDUCE, "block_sums"), grid, block, x, sums, n)
    expected = np.add.reduceat(values, np.arange(0, n, block))
    np.testing.assert_array_equal(sums.to_numpy(), expected)


SYNC_VARIANTS = r"""
__global__ void votes(const int* flags, int* out) {
    int f = flags[threadIdx.x];
    int count = __syncthreads_count(f);
    int all = __syncthreads_and(f);
    int any = __syncthreads_or(f);
    if (threadIdx.x == 0) { out[3 * blockIdx.x] = count; out[3 * blockIdx.x + 1] = all; out[3 * blockIdx.x + 2] = any; }
}
"""


def test_syncthreads_count_and_or(device, stream):
    flags = np.zeros(64, np.int32)
    flags[[3, 9, 40]] = 1
    out = device.zeros(3, np.int32)
    run(stream, gg.Kernel(SYNC_VARIANTS, "votes"), 1, 64, device.asarray(flags), out)
    np.testing.assert_array_equal(out.to_numpy(), [3, 0, 1])


DYNAMIC_SHARED = r"""
extern __shared__ float tile[];
__global__ void reverse_blocks(const float* x, float* y) {
    unsigned t = threadIdx.x, base = blockIdx.x * blockDim.x;
    tile[t] = x[base + t];
    __syncthreads();
    y[base + t] = tile[blockDim.x - 1 - t];
}
__global__ void reverse_local(const double* x, double* y) {
    extern __shared__ double slots[];
    unsigned t = threadIdx.x, base = blockIdx.x * blockDim.x;
    slots[t] = x[base + t];
    __syncthreads();
    y[base + t] = slots[blockDim.x - 1 - t];
}
"""


@pytest.mark.parametrize("name, dtype", [("reverse_blocks", np.float32), ("reverse_local", np.float64)])
def test_dynamic_shared_memory_has_the_launch_size(device, stream, name, dtype):
    blocks, block = 8, 128
    values = np.arange(blocks * block, dtype=dtype)
    x, y = device.asarray(values), device.zeros(blocks * block, dtype)
    run(stream, gg.Kernel(DYNAMIC_SHARED, name), blocks, block, x, y,
        shared_mem=block * np.dtype(dtype).itemsize)
    np.testing.assert_array_equal(y.to_numpy(), values.reshape(blocks, block)[:, ::-1].ravel())


HISTOGRAM = r"""
__global__ void histogram(const unsigned char* data, unsigned* bins, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicAdd(&bins[data[i]], 1u);
}
"""


def test_an_atomics_histogram(device, stream):
    rng = np.random.default_rng(7)
    data = rng.integers(0, 256, 200_000, dtype=np.uint8)
    bins = device.zeros(256, np.uint32)
    run(stream, gg.Kernel(HISTOGRAM, "histogram"), 64, 256, device.asarray(data), bins, data.size)
    np.testing.assert_array_equal(bins.to_numpy(), np.bincount(data, minlength=256))


ATOMICS = r"""
__global__ void atomics(int* i, unsigned* u, float* f, double* d, unsigned long long* ull) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;  // 0..511
    atomicAdd(&i[0], t);
    atomicSub(&i[1], t);
    atomicMin(&i[2], t - 100);
    atomicMax(&i[3], t);
    atomicAnd(&u[0], ~(1u << (t % 32)));
    atomicOr(&u[1], 1u << (t % 32));
    atomicXor(&u[2], 1u << (t % 8));
    atomicAdd(&f[0], 0.5f);
    atomicAdd(&d[0], 0.25);
    atomicAdd(&ull[0], 3ull);
    if (t == 5) atomicExch(&i[4], 77);
    atomicCAS(&i[5], 0, t + 1000);  // one thread wins; the value is one of 1000..1511
    atomicInc(&u[3], 99u);
    atomicDec(&u[4], 1000u);
}
"""


def test_each_atomic_operation(device, stream):
    i = device.asarray(np.array([0, 0, 10**6, -1, 0, 0], np.int32))
    u = device.asarray(np.array([0xFFFFFFFF, 0, 0, 0, 0], np.uint32))
    f, d, ull = device.zeros(1, np.float32), device.zeros(1, np.float64), device.zeros(1, np.uint64)
    run(stream, gg.Kernel(ATOMICS, "atomics"), 2, 256, i, u, f, d, ull)
    got_i, got_u = i.to_numpy(), u.to_numpy()
    t = np.arange(512)
    assert list(got_i[:5]) == [t.sum(), -t.sum(), -100, 511, 77]
    assert 1000 <= got_i[5] <= 1511
    assert list(got_u[:3]) == [0, 0xFFFFFFFF, 0]  # (each of the 8 low bits flipped 64 times)
    assert got_u[3] == 512 % 100 and got_u[4] == (0 - 512) % 1001
    assert f.to_numpy()[0] == 256.0 and d.to_numpy()[0] == 128.0 and ull.to_numpy()[0] == 1536


MATH = r"""
__global__ void maths(const float* x, float* out, double* dout, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    out[8 * i + 0] = sinf(v);
    out[8 * i + 1] = __expf(v);
    out[8 * i + 2] = fmaf(v, 2.0f, 1.0f);
    out[8 * i + 3] = rsqrtf(v + 4.0f);
    out[8 * i + 4] = fminf(v, 0.5f) + fmaxf(v, -0.5f);
    out[8 * i + 5] = sqrtf(fabsf(v)) + floorf(v) + ceilf(v);
    out[8 * i + 6] = powf(2.0f, v) + logf(v + 4.0f) + tanhf(v);
    out[8 * i + 7] = min(v, 1.0f) + max(i, 3);
    dout[i] = sin((double)v) + exp((double)v) + rsqrt((double)v + 4.0);
}
"""


def test_math_functions_and_intrinsics(device, stream):
    n = 200
    v = np.linspace(-3, 3, n, dtype=np.float32)
    x, out, dout = device.asarray(v), device.zeros(8 * n, np.float32), device.zeros(n, np.float64)
    run(stream, gg.Kernel(MATH, "maths"), 1, 256, x, out, dout, n)
    w = v.astype(np.float64)
    expected = np.stack([np.sin(w), np.exp(w), w * 2 + 1, 1 / np.sqrt(w + 4), np.minimum(w, 0.5) + np.maximum(w, -0.5),
                         np.sqrt(np.abs(w)) + np.floor(w) + np.ceil(w), 2 ** w + np.log(w + 4) + np.tanh(w),
                         np.minimum(w, 1) + np.maximum(np.arange(n), 3)], axis=1)
    np.testing.assert_allclose(out.to_numpy().reshape(n, 8), expected, rtol=2e-6, atol=2e-6)
    np.testing.assert_allclose(dout.to_numpy(), np.sin(w) + np.exp(w) + 1 / np.sqrt(w + 4), rtol=1e-14)


SPECIAL = r"""
__global__ void special(const double* x, double* out, float* fout, long long* ints, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double v = x[i];
    double s, c;
    sincospi(v, &s, &c);
    double* o = out + 10 * i;
    o[0] = erfinv(v); o[1] = erfcinv(1.0 - v); o[2] = normcdf(3.0 * v); o[3] = normcdfinv(0.5 * (v + 1.0));
    o[4] = erfcx(4.0 * v); o[5] = cyl_bessel_i0(5.0 * v); o[6] = cyl_bessel_i1(5.0 * v);
    o[7] = norm3d(v, 2.0, 3.0) * rnorm4d(v, 1.0, 2.0, 2.0); o[8] = rhypot(v, 1.0); o[9] = s * s + c * c;
    float* f = fout + 4 * i;
    f[0] = erfinvf((float)v); f[1] = normcdff(3.0f * (float)v); f[2] = __frsqrt_rn(4.0f + (float)v);
    f[3] = __ll2float_rn(1ll << 40);
    long long* k = ints + 5 * i;
    double big = 1.0e6 * v;
    k[0] = __double2ll_rz(big); k[1] = __double2ll_rd(big); k[2] = __double2ll_ru(big);
    k[3] = __float2ll_rn((float)big);
    k[4] = __hiloint2double(__double2hiint(v), __double2loint(v)) == v;
}
"""


def test_special_functions_and_conversions(device, stream):
    n = 101
    v = np.linspace(-0.995, 0.995, n)
    x, out = device.asarray(v), device.zeros(10 * n, np.float64)
    fout, ints = device.zeros(4 * n, np.float32), device.zeros(5 * n, np.int64)
    run(stream, gg.Kernel(SPECIAL, "special"), 1, 128, x, out, fout, ints, n)
    o, f, k = out.to_numpy().reshape(n, 10), fout.to_numpy().reshape(n, 4), ints.to_numpy().reshape(n, 5)
    erf, erfc = np.vectorize(math.erf), np.vectorize(math.erfc)
    np.testing.assert_allclose(erf(o[:, 0]), v, rtol=1e-14)
    np.testing.assert_allclose(o[:, 1], o[:, 0], rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(o[:, 2], 0.5 * erfc(-3 * v / math.sqrt(2)), rtol=1e-14)
    np.testing.assert_allclose(0.5 * erfc(-o[:, 3] / math.sqrt(2)), 0.5 * (v + 1), rtol=1e-13)
    np.testing.assert_allclose(o[:, 4], np.exp((4 * v) ** 2) * erfc(4 * v), rtol=1e-12)
    np.testing.assert_allclose(o[:, 5], np.i0(5 * v), rtol=1e-13)
    i1 = sum((5 * v / 2) ** (2 * m + 1) / (math.factorial(m) * math.factorial(m + 1)) for m in range(40))
    np.testing.assert_allclose(o[:, 6], i1, rtol=1e-13)
    np.testing.assert_allclose(o[:, 7], np.sqrt(v * v + 13) / np.sqrt(v * v + 9), rtol=1e-14)
    np.testing.assert_allclose(o[:, 8], 1 / np.hypot(v, 1), rtol=1e-14)
    np.testing.assert_allclose(o[:, 9], 1.0, rtol=1e-15)
    np.testing.assert_allclose(erf(f[:, 0].astype(np.float64)), v, rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(f[:, 1], 0.5 * erfc(-3 * v / math.sqrt(2)), rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(f[:, 2], 1 / np.sqrt(4 + v.astype(np.float32)), rtol=2e-7)
    assert (f[:, 3] == 2.0 ** 40).all()
    big = 1.0e6 * v
    np.testing.assert_array_equal(k[:, 0], np.trunc(big))
    np.testing.assert_array_equal(k[:, 1], np.floor(big))
    np.testing.assert_array_equal(k[:, 2], np.ceil(big))
    np.testing.assert_array_equal(k[:, 3], np.rint(big.astype(np.float32)))
    assert (k[:, 4] == 1).all()


def test_more_dynamic_shared_memory_than_48_kib_is_refused_on_every_backend(device, stream):
    x = device.zeros(4, np.float32)
    kernel = gg.Kernel("__global__ void k(float* x) { extern __shared__ float s[]; s[0] = 1.0f; x[0] = s[0]; }", "k")
    with pytest.raises(ValueError, match=r"shared_mem: 49153 bytes is more than the 49152 bytes \(48 KiB\)"):
        stream.launch(kernel, 1, 1, x, shared_mem=48 * 1024 + 1)
    with pytest.raises(ValueError, match=r"more than the 49152 bytes"):
        gg.Graph(device).add_kernel(kernel, 1, 1, x, shared_mem=48 * 1024 + 1)
    run(stream, kernel, 1, 1, x, shared_mem=48 * 1024)  # the most: runs
    assert x.to_numpy()[0] == 1.0


def test_a_thread_may_use_as_much_local_memory_as_on_a_gpu(device, stream):
    """A GPU thread may have 512 KiB of local memory; on the CPU a block that synchronizes runs its threads as fibers,
    whose stacks hold 400 KiB. A GPU reserves a launch's local memory for every thread it can hold at once, so there
    the size is what half the device's memory allows (about 268 KiB on an H200, 144 KiB on an 80 GB H100), at most
    400 KiB."""
    floats = 100 * 1024
    if device.backend != "cpu":
        properties = device.properties
        resident = properties["multiProcessorCount"] * properties["maxThreadsPerMultiProcessor"]
        floats = min(floats, properties["totalGlobalMem"] // 2 // resident // 4 // 1024 * 1024)
    source = r"""
    __global__ void local(float* out) {
        float scratch[FLOATS];
        for (int i = 0; i < FLOATS; ++i) scratch[i] = threadIdx.x + i;
        __syncthreads();
        float sum = 0.0f;
        for (int i = 0; i < FLOATS; i += 1024) sum += scratch[i];
        out[threadIdx.x] = sum;
    }""".replace("FLOATS", str(floats))
    out = device.zeros(4, np.float32)
    run(stream, gg.Kernel(source, "local"), 1, 4, out)
    want = [sum(float(t + i) for i in range(0, floats, 1024)) for t in range(4)]
    np.testing.assert_allclose(out.to_numpy(), want, rtol=1e-6)


VECTORS = r"""
__global__ void swizzle(const float4* in, float4* out, int2* pairs, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float4 v = in[i];
    out[i] = make_float4(v.w, v.z, v.y, v.x);
    pairs[i] = make_int2(i, -i);
}
"""


def test_vector_types(device, stream):
    n = 50
    values = np.arange(4 * n, dtype=np.float32)
    x, y, pairs = device.asarray(values), device.zeros(4 * n, np.float32), device.zeros(2 * n, np.int32)
    kernel = gg.Kernel(VECTORS, "swizzle")
    run(stream, kernel, 1, 64, x, y, pairs, n)
    np.testing.assert_array_equal(y.to_numpy(), values.reshape(n, 4)[:, ::-1].ravel())
    np.testing.assert_array_equal(pairs.to_numpy().reshape(n, 2), np.stack([np.arange(n), -np.arange(n)], 1))


HALF = r"""
#include <cuda_fp16.h>
__global__ void halves(const __half* x, __half* y, float* f, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = __hadd(x[i], __float2half(0.5f));
        f[i] = __half2float(x[i]) * 2.0f;
    }
}
"""


def test_half_precision(device, stream):
    n = 64
    values = np.linspace(-4, 4, n).astype(np.float16)
    x, y, f = device.asarray(values), device.zeros(n, np.float16), device.zeros(n, np.float32)
    run(stream, gg.Kernel(HALF, "halves"), 1, 64, x, y, f, n)
    np.testing.assert_array_equal(y.to_numpy(), values + np.float16(0.5))
    np.testing.assert_array_equal(f.to_numpy(), values.astype(np.float32) * 2)


PRINTF = r"""
__global__ void hello(int value) { if (threadIdx.x == 0) printf("hello from the kernel: %d\n", value); }
"""


def test_printf(device, stream, capfd):
    run(stream, gg.Kernel(PRINTF, "hello"), 1, 4, 7)
    assert capfd.readouterr().out.count("hello from the kernel: 7") == 1


HIP = r"""
#include <hip/hip_runtime.h>
template <typename T>
__global__ void fill(T* x, T value, int n) {
    int i = hipBlockIdx_x * hipBlockDim_x + hipThreadIdx_x;
    if (i < n) x[i] = value + (T)hipGridDim_x;
}
// HIP's dynamic shared memory, and a kernel named through HIP_KERNEL_NAME (as hipLaunchKernelGGL takes it).
__global__ void HIP_KERNEL_NAME(mirror)(float* x) {
    HIP_DYNAMIC_SHARED(float, staged)
    staged[hipThreadIdx_x] = x[hipThreadIdx_x];
    __syncthreads();
    x[hipThreadIdx_x] = staged[hipBlockDim_x - 1 - hipThreadIdx_x];
}
"""


def test_hip_spellings_on_the_cpu():
    device = gg.Device("cpu")
    stream = device.stream()
    x = device.zeros(100, np.float32)
    run(stream, gg.Kernel(HIP, "fill<float>"), 2, 64, x, 1.5, 100)
    np.testing.assert_array_equal(x.to_numpy(), np.full(100, 3.5, np.float32))
    y = device.asarray(np.arange(64, dtype=np.float32))
    run(stream, gg.Kernel(HIP, "mirror"), 1, 64, y, shared_mem=64 * 4)
    np.testing.assert_array_equal(y.to_numpy(), np.arange(64, dtype=np.float32)[::-1])


WARP = "a warp-level intrinsic"
DIRECTED = "an intrinsic with a set rounding direction"


@pytest.mark.parametrize("call, what", [("__shfl_down_sync(0xffffffffu, v, 1)", WARP),
                                        ("__ballot_sync(0xffffffffu, v > 0)", WARP),
                                        ("__fadd_rz(v, 1.0f)", DIRECTED), ("__dmul_ru((double)v, 2.0)", DIRECTED),
                                        ("__int2float_rd(3)", DIRECTED)])
def test_an_intrinsic_the_cpu_lacks_is_refused_naming_it(call, what):
    source = f"__global__ void k(float* x) {{ float v = x[threadIdx.x]; x[threadIdx.x] = (float){call}; }}"
    device = gg.Device("cpu")
    name = call.split("(")[0]
    with pytest.raises(gg.KernelCompileError, match=rf"{name} \({what}\) is not supported"):
        device.stream().launch(gg.Kernel(source, "k"), 1, 32, device.zeros(32, np.float32))


def test_cooperative_groups_are_refused_on_the_cpu():
    source = ("#include <cooperative_groups.h>\n"
              "__global__ void k(float* x) { x[0] = 1.0f; }")
    device = gg.Device("cpu")
    with pytest.raises(gg.KernelCompileError, match="cooperative groups"):
        device.stream().launch(gg.Kernel(source, "k"), 1, 1, device.zeros(1, np.float32))


def test_a_compile_error_points_at_the_line_of_the_source():
    source = "__global__ void broken(float* x) {\n    x[0] = 1.0f;\n    x[1] = undefined_name;\n}\n"
    device = gg.Device("cpu")
    with pytest.raises(gg.KernelCompileError, match=r"broken\.cu:3:\d+: error: .undefined_name") as caught:
        device.stream().launch(gg.Kernel(source, "broken"), 1, 1, device.zeros(2, np.float32))
    assert "undefined_name" in caught.value.log


def test_no_compiler_is_a_clear_error_that_mentions_cpu(monkeypatch):
    monkeypatch.setattr(_compile, "compiler", lambda: None)
    monkeypatch.delenv("CXX", raising=False)
    source = "__global__ void lonely(float* x) { x[0] = 2.0f; }  // (a source no other test compiles)"
    device = gg.Device("cpu")
    with pytest.raises(gg.KernelCompileError, match=r"(?s)none was found.*cpu=fn"):
        device.stream().launch(gg.Kernel(source, "lonely"), 1, 1, device.zeros(1, np.float32))


def test_an_option_with_no_host_equivalent_is_refused():
    device = gg.Device("cpu")
    kernel = gg.Kernel(QUALIFIERS, "apply", options=("--some-nvrtc-option",))
    with pytest.raises(gg.KernelCompileError, match="no equivalent of the compiler option '--some-nvrtc-option'"):
        device.stream().launch(kernel, 1, 1, device.zeros(1, np.float32), device.zeros(1, np.float32), 1)


def test_a_compiled_kernel_is_cached_on_disk_for_the_next_process(tmp_path):
    script = (
        "import numpy as np, gpugraph as gg\n"
        "d = gg.Device('cpu'); s = d.stream(); x = d.zeros(4, np.float32)\n"
        "s.launch(gg.Kernel('__global__ void four(float* x) { x[threadIdx.x] = 4.0f; }', 'four'), 1, 4, x)\n"
        "s.synchronize(); print(x.to_numpy().tolist())\n")
    env = {**os.environ, "GPUGRAPH_CACHE_DIR": str(tmp_path)}
    first = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    libraries = list(tmp_path.rglob("*.so"))
    assert first.stdout.strip() == "[4.0, 4.0, 4.0, 4.0]" and len(libraries) == 1
    stamp = libraries[0].stat().st_mtime_ns
    # A second process, whose compiler fails if it is run: it loads the cached library instead.
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "g++").write_text(f"#!/bin/sh\n[ \"$1\" = --version ] && exec {_compile.compiler()[0]} --version\nexit 1\n")
    (fake / "g++").chmod(0o755)
    second = subprocess.run([sys.executable, "-c", script], env={**env, "CXX": str(fake / "g++")},
                            capture_output=True, text=True)
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == "[4.0, 4.0, 4.0, 4.0]"
    assert [p.stat().st_mtime_ns for p in tmp_path.rglob("*.so")] == [stamp]


def test_a_compiled_kernel_in_a_graph_with_a_param_update_and_set_params(device, stream):
    kernel = gg.Kernel(TEMPLATES, "axpb<float>")
    n = 64
    x, y = device.asarray(np.arange(n, dtype=np.float32)), device.zeros(n, np.float32)
    a = gg.Param(2.0, np.float32)
    graph = gg.Graph(device)
    node = graph.add_kernel(kernel, 1, 64, a, x, 1.0, y, n)
    exe = graph.instantiate()
    exe.launch(stream)
    stream.synchronize()
    np.testing.assert_array_equal(y.to_numpy(), 2 * np.arange(n) + 1)
    a.value = 3.0
    exe.launch(stream)
    stream.synchronize()
    np.testing.assert_array_equal(y.to_numpy(), 3 * np.arange(n) + 1)
    exe.set_params(node, 5.0, x, -1.0, y, n)
    exe.launch(stream)
    stream.synchronize()
    np.testing.assert_array_equal(y.to_numpy(), 5 * np.arange(n) - 1)


POINTER_ARRAYS = r"""
// out[i] = rows[i % rowCount][i]: reads through an array of device addresses.
__global__ void gather(float* out, float* const* rows, int rowCount, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = rows[i % rowCount][i];
}
// Swaps the first two addresses, and writes through each.
__global__ void swap_and_mark(float** rows) {
    if (threadIdx.x == 0) {
        float* first = rows[0];
        rows[0] = rows[1];
        rows[1] = first;
        rows[0][0] = -1.0f;
        rows[1][1] = -2.0f;
    }
}
"""


def test_arrays_of_device_addresses_of_stream_and_graph_allocations(device, stream):
    """A T** argument holds device addresses (a.ptr): on the CPU backend, those of stream-ordered and graph
    allocations are translated to their memory when the kernel runs, and the kernel's writes to the array come
    back as device addresses, as on a GPU."""
    n = 8
    gather = gg.Kernel(POINTER_ARRAYS, "gather")
    swap = gg.Kernel(POINTER_ARRAYS, "swap_and_mark")
    plain = device.asarray(np.full(n, 1.0, np.float32))
    out = device.zeros(n, np.float32)
    first, second = stream.alloc(n, np.float32), stream.alloc(n, np.float32)
    stream.memset(first, 2.0)
    stream.memset(second, 3.0)
    rows = device.asarray(np.array([first.ptr, plain.ptr, second.ptr], np.uint64))
    stream.launch(gather, 1, 32, out, rows, 3, n)
    stream.launch(swap, 1, 32, rows)
    stream.synchronize()
    np.testing.assert_array_equal(out.to_numpy(), [2, 1, 3, 2, 1, 3, 2, 1])
    np.testing.assert_array_equal(rows.to_numpy(), [plain.ptr, first.ptr, second.ptr])  # swapped, as addresses
    stream.memcpy(out, first)
    stream.synchronize()
    np.testing.assert_array_equal(out.to_numpy()[:2], [2, -2])
    np.testing.assert_array_equal(plain.to_numpy()[:2], [-1, 1])
    stream.free(first)
    stream.free(second)

    graph = gg.Graph(device)
    a, b = graph.add_alloc(n, np.float32), graph.add_alloc(n, np.float32)
    addresses = device.asarray(np.array([a.array.ptr, b.array.ptr], np.uint64))
    set_a = graph.add_memset(a.array, 4.0, after=a)
    set_b = graph.add_memset(b.array, 5.0, after=b)
    read = graph.add_kernel(gather, 1, 32, out, addresses, 2, n, after=(set_a, set_b))
    graph.add_free(a, after=read)
    graph.add_free(b, after=read)
    with graph.instantiate() as exe:
        for _ in range(2):
            stream.memset(out, 0.0)
            exe.launch(stream)
            stream.synchronize()
            np.testing.assert_array_equal(out.to_numpy(), [4, 5] * 4)


def test_an_address_of_memory_not_allocated_when_the_kernel_runs_is_an_error_on_the_cpu():
    device = gg.Device("cpu")
    stream = device.stream()
    out = device.zeros(4, np.float32)
    freed = stream.alloc(4, np.float32)
    rows = device.asarray(np.array([freed.ptr], np.uint64))
    stream.free(freed)
    stream.launch(gg.Kernel(POINTER_ARRAYS, "gather"), 1, 32, out, rows, 1, 4)
    with pytest.raises(gg.GpuGraphError, match=r"argument 1 \(float\*\* rows\): element 0 is 0x[0-9a-f]+, "
                                               r"the address of the stream allocation at 0x[0-9a-f]+, which is "
                                               r"not allocated when the kernel runs"):
        stream.synchronize()


STOPPING = r"""
#ifndef assert
#include <assert.h>
#endif
__global__ void checked(const int* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) assert(x[i] >= 0);
}
__global__ void trapping(int* x) {
    if (threadIdx.x == 3) __trap();
}
__global__ void checked_at_a_barrier(int* x) {
    __shared__ int seen[64];
    seen[threadIdx.x] = x[threadIdx.x];
    __syncthreads();
    assert(seen[(threadIdx.x + 1) % 64] >= 0);
}
"""
STOP_SCRIPT = r"""
import sys, numpy as np, gpugraph as gg
sys.path.insert(0, {tests!r})
from test_kernel_language import STOPPING
device = gg.Device({backend!r})
stream = device.stream()
x = device.asarray(np.array([0, 1, 2, 3, -5] + [0] * 59, np.int32))
stream.launch(gg.Kernel(STOPPING, {name!r}), 1, 64, *({name!r} == "checked" and (x, 64) or (x,)))
try:
    stream.synchronize()
except gg.BackendError as error:
    print("STOPPED", error.code)
    print(error)
"""


@pytest.mark.stops_a_kernel
@pytest.mark.parametrize("name, code", [("checked", "CUDA_ERROR_ASSERT"), ("trapping", "CUDA_ERROR_LAUNCH_FAILED"),
                                        ("checked_at_a_barrier", "CUDA_ERROR_ASSERT")])
def test_a_failed_assert_or_a_trap_stops_the_kernel_with_cudas_error(device, name, code):
    """CUDA reports a kernel's failed assert (cudaErrorAssert) or __trap() (a launch failure) at the next
    synchronize; so does the CPU backend, whose message names the block, the thread and the assertion. (A
    subprocess: on CUDA the context is unusable afterwards.)"""
    tests = os.path.dirname(os.path.abspath(__file__))
    script = STOP_SCRIPT.format(tests=tests, backend=device.backend, name=name)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode == 0, done.stderr
    assert f"STOPPED {code}" in done.stdout, done.stdout + done.stderr
    if device.backend == "cpu":
        where = {"checked": "thread (4, 0, 0): checked.cu:7: void checked(const int*, int): "
                            "Assertion `x[i] >= 0` failed.",
                 "trapping": "block (0, 0, 0), thread (3, 0, 0): __trap() called",
                 "checked_at_a_barrier": "thread (3, 0, 0): checked_at_a_barrier.cu:16: void "
                                         "checked_at_a_barrier(int*): Assertion `seen[(threadIdx.x + 1) % 64] >= 0` "
                                         "failed."}[name]
        assert where in done.stdout, done.stdout


def test_assert_is_off_under_ndebug(device, stream):
    x = device.asarray(np.array([-1], np.int32))
    run(stream, gg.Kernel(STOPPING, "checked", options=("-DNDEBUG",)), 1, 1, x, 1)


LARGE = r"""
__global__ void offsets(unsigned* x, unsigned n, unsigned stop_at) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i == stop_at) __trap();
    if (i < n) x[i] = i * 3u + %d;
}
"""


@pytest.mark.parametrize("with_openmp", [True, False])
def test_a_large_launch_spreads_its_blocks_over_the_cores_with_or_without_openmp(monkeypatch, with_openmp):
    """Launches of 2^15 threads or more run their blocks on every core: in one call with OpenMP, else from
    Python's worker threads; the results, and a trap in any block, are the same."""
    if with_openmp and not _compile.openmp(*_compile.compiler()):
        pytest.skip("this compiler builds no OpenMP code")
    monkeypatch.setattr(_compile, "openmp", lambda path, version: with_openmp)
    device = gg.Device("cpu")
    stream = device.stream()
    n = 1 << 18
    x = device.zeros(n, np.uint32)
    kernel = gg.Kernel(LARGE % (7 if with_openmp else 11), "offsets")  # (a source of its own: compiled here)
    assert _load.load(kernel)._module.parallel is with_openmp
    run(stream, kernel, n // 256, 256, x, n, n)
    np.testing.assert_array_equal(x.to_numpy(), np.arange(n, dtype=np.uint32) * 3 + (7 if with_openmp else 11))
    stream.launch(kernel, n // 256, 256, x, n, n - 5)
    with pytest.raises(gg.BackendError, match=r"CUDA_ERROR_LAUNCH_FAILED: the kernel stopped: block \(1023, 0, 0\), "
                                              r"thread \(251, 0, 0\): __trap\(\) called"):
        stream.synchronize()


def test_syncthreads_and_is_one_when_every_thread_agrees(device, stream):
    source = r"""
    __global__ void all_positive(const int* x, int* out) {
        int agreed = __syncthreads_and(x[blockIdx.x * blockDim.x + threadIdx.x] > 0);
        if (threadIdx.x == 0) out[blockIdx.x] = agreed;
    }"""
    x = device.asarray(np.array([1] * 64 + [1] * 31 + [0] + [1] * 32, np.int32))
    out = device.zeros(2, np.int32)
    run(stream, gg.Kernel(source, "all_positive"), 2, 64, x, out)
    np.testing.assert_array_equal(out.to_numpy(), [1, 0])


def test_syncthreads_from_an_included_header_runs_the_blocks_as_fibers(device, stream, tmp_path):
    """A barrier the source reaches only through a header (or a macro) still means what it means on a GPU: the
    kernel's own text never names __syncthreads."""
    (tmp_path / "reverse.h").write_text(
        "__device__ void reverse_in_place(float* s) {\n    float v = s[threadIdx.x];\n    __syncthreads();\n"
        "    s[blockDim.x - 1 - threadIdx.x] = v;\n    __syncthreads();\n}\n")
    source = r"""
    #include "reverse.h"
    __global__ void reverse(float* x) {
        __shared__ float s[128];
        s[threadIdx.x] = x[blockIdx.x * blockDim.x + threadIdx.x];
        reverse_in_place(s);
        x[blockIdx.x * blockDim.x + threadIdx.x] = s[threadIdx.x];
    }"""
    values = np.arange(256, dtype=np.float32)
    x = device.asarray(values)
    kernel = gg.Kernel(source, "reverse", options=(f"-I{tmp_path}",))
    run(stream, kernel, 2, 128, x)
    np.testing.assert_array_equal(x.to_numpy(), values.reshape(2, 128)[:, ::-1].ravel())
    if device.backend == "cpu":
        assert _load.load(kernel)._module.fibers


EXTERN_SHARED_SCOPES = r"""
// extern __shared__ float not_a_declaration[];
const char* brace = "{";
extern "C" {
extern __shared__ float staged[];
__global__ void stage(const float* x, float* y) {
    staged[threadIdx.x] = x[threadIdx.x] * 2.0f;
    __syncthreads();
    y[threadIdx.x] = staged[blockDim.x - 1 - threadIdx.x];
}
}
"""


def test_extern_shared_in_an_extern_c_block_after_a_brace_in_a_literal(device, stream):
    x = device.asarray(np.arange(32, dtype=np.float32))
    y = device.zeros(32, np.float32)
    run(stream, gg.Kernel(EXTERN_SHARED_SCOPES, "stage"), 1, 32, x, y, shared_mem=32 * 4)
    np.testing.assert_array_equal(y.to_numpy(), np.arange(32, dtype=np.float32)[::-1] * 2)


@pytest.mark.parametrize("name", ["stag", "twice"])
def test_a_name_that_is_no_kernel_is_refused_the_same_way_on_every_backend(device, stream, name):
    source = EXTERN_SHARED_SCOPES + "__device__ float twice(float v) { return 2.0f * v; }\n"
    with pytest.raises(gg.KernelCompileError, match=rf"the compiled module has no kernel '{name}': no `__global__ "
                                                    rf"void {name}\(\.\.\.\)` in the source"):
        stream.launch(gg.Kernel(source, name), 1, 1, device.zeros(1, np.float32), device.zeros(1, np.float32))


def test_cpp14_source_compiles_on_the_cpu(device, stream):
    x = device.zeros(4, np.float32)
    run(stream, gg.Kernel("__global__ void four(float* x) { x[threadIdx.x] = 4.0f; }", "four",
                          options=("-std=c++14",)), 1, 4, x)
    np.testing.assert_array_equal(x.to_numpy(), [4, 4, 4, 4])


def test_a_changed_header_is_compiled_again_in_the_next_process(tmp_path):
    """The disk cache keys a library by its source and options, and checks the user's headers it read."""
    include = tmp_path / "include"
    include.mkdir()
    (include / "value.h").write_text("#define VALUE 1.0f\n")
    script = (
        "import numpy as np, gpugraph as gg\n"
        "d = gg.Device('cpu'); s = d.stream(); x = d.zeros(2, np.float32)\n"
        "k = gg.Kernel('#include \"value.h\"\\n__global__ void v(float* x) { x[threadIdx.x] = VALUE; }', 'v',\n"
        f"              options=('-I{include}',))\n"
        "s.launch(k, 1, 2, x); s.synchronize(); print(x.to_numpy().tolist())\n")
    env = {**os.environ, "GPUGRAPH_CACHE_DIR": str(tmp_path / "cache")}
    first = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    assert first.stdout.strip() == "[1.0, 1.0]"
    (include / "value.h").write_text("#define VALUE 2.0f  // changed\n")
    second = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    assert second.stdout.strip() == "[2.0, 2.0]"


DIVIDE = r"""
__global__ void divide(const int* d, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 1000 / d[i];
}
__global__ void divide_at_a_barrier(const int* d, int* out) {
    __shared__ int s[64];
    s[threadIdx.x] = d[threadIdx.x];
    __syncthreads();
    out[threadIdx.x] = 1000 / s[63 - threadIdx.x];
}
"""


@pytest.mark.parametrize("name", ["divide", "divide_at_a_barrier"])
def test_an_integer_division_by_zero_stops_the_kernel_on_the_cpu(name):
    """A GPU gives an unspecified value; the CPU's divide instruction faults, and the fault stops the kernel with
    an error at the next synchronize instead of ending the process. The device goes on working."""
    device = gg.Device("cpu")
    stream = device.stream()
    d = device.asarray(np.array([5] * 10 + [0] + [4] * 53, np.int32))
    out = device.zeros(64, np.int32)
    kernel = gg.Kernel(DIVIDE, name)
    args = (d, out, 64) if name == "divide" else (d, out)
    stream.launch(kernel, 1, 64, *args)
    thread = 10 if name == "divide" else 53
    with pytest.raises(gg.BackendError, match=rf"CUDA_ERROR_LAUNCH_FAILED: the kernel stopped: block \(0, 0, 0\), "
                                              rf"thread \({thread}, 0, 0\): integer division by zero or overflow"):
        stream.synchronize()
    stream.memcpy(d, np.full(64, 8, np.int32))
    run(stream, kernel, 1, 64, *args)
    np.testing.assert_array_equal(out.to_numpy(), np.full(64, 125))


def test_fast_math_keeps_nan_and_infinity_on_every_backend(device, stream):
    """CUDA's -use_fast_math approximates but still honours NaN and infinity; so does the CPU backend (which
    keeps IEEE's exact results: -ffast-math would fold isnan away)."""
    source = r"""
    __global__ void classify(const float* x, float* y, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] = isnan(x[i]) ? 1.0f : (isinf(x[i]) ? 2.0f : 0.0f);
    }"""
    x = device.asarray(np.array([np.nan, np.inf, -np.inf, 1.5], np.float32))
    y = device.zeros(4, np.float32)
    run(stream, gg.Kernel(source, "classify", options=("-use_fast_math",)), 1, 32, x, y, 4)
    np.testing.assert_array_equal(y.to_numpy(), [1, 2, 2, 0])


@pytest.mark.parametrize("call", ["atomicAdd((long long*)p, 1LL)", "atomicSub((unsigned long long*)p, 1ull)",
                                  "atomicExch((double*)p, 1.0)", "atomicCAS((long long*)p, 1LL, 2LL)"])
def test_an_atomic_overload_cuda_lacks_fails_to_compile_on_every_backend(device, stream, call):
    """The CPU header declares CUDA's atomic overloads and no others, so a kernel that compiles on the CPU
    compiles for a GPU too."""
    source = f"__global__ void k(void* p) {{ if (threadIdx.x == 0) {call}; }}"
    # (NVRTC: no instance of overloaded function; g++: no matching function, or an invalid conversion to the
    # argument of the one overload of that name; clang++: no matching function)
    with pytest.raises(gg.KernelCompileError, match=r"(?s)error: (no instance of overloaded function|no matching "
                                                    r"function for call to|invalid conversion from).*atomic"):
        stream.launch(gg.Kernel(source, "k"), 1, 1, device.zeros(1, np.uint64))


def test_long_long_atomics(device, stream):
    source = r"""
    __global__ void extremes(const long long* x, long long* lo, long long* hi, long long* bits, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) { atomicMin(lo, x[i]); atomicMax(hi, x[i]); atomicXor(bits, x[i]); }
    }"""
    values = np.random.default_rng(3).integers(-2**62, 2**62, 1000, dtype=np.int64)
    lo = device.asarray(np.array([np.iinfo(np.int64).max], np.int64))
    hi = device.asarray(np.array([np.iinfo(np.int64).min], np.int64))
    bits = device.zeros(1, np.int64)
    run(stream, gg.Kernel(source, "extremes"), 4, 256, device.asarray(values), lo, hi, bits, 1000)
    assert lo.to_numpy()[0] == values.min() and hi.to_numpy()[0] == values.max()
    assert bits.to_numpy()[0] == np.bitwise_xor.reduce(values)


MIXED = r"""
#if 0
__global__ void switched_off(float* x) { x[0] = 1.0f; }
#endif
__global__ void declared_only(float* x);
struct Pair { double a, b; };
__global__ void by_value(Pair p, float* x) { x[0] = float(p.a + p.b); }
__global__ void working(float* x) { x[threadIdx.x] = 5.0f; }
"""


def test_a_kernel_that_cannot_be_named_breaks_no_other_kernel_of_its_source(device, stream):
    """A __global__ in an `#if 0` branch, one declared and never defined, and one taking a 16-byte struct: the
    other kernels of the source still compile and run, and the named one gets its own error."""
    x = device.zeros(4, np.float32)
    run(stream, gg.Kernel(MIXED, "working"), 1, 4, x)
    np.testing.assert_array_equal(x.to_numpy(), [5, 5, 5, 5])
    for name in ("switched_off", "declared_only"):
        with pytest.raises(gg.KernelCompileError, match=name):
            stream.launch(gg.Kernel(MIXED, name), 1, 1, x)


def test_a_struct_parameter_of_16_bytes_is_refused_when_loaded_on_the_cpu():
    device = gg.Device("cpu")
    with pytest.raises(gg.KernelCompileError, match=r"parameter 0 \(Pair p\) is neither a pointer nor a number type"):
        device.stream().launch(gg.Kernel(MIXED, "by_value"), 1, 1, np.float64(1), device.zeros(1, np.float32))


def test_a_compile_error_is_not_hidden_behind_no_kernel(device, stream):
    """A name the source has no kernel of, in a source that does not compile (and spells the name, so that gpugraph
    cannot tell before compiling): the compiler's errors, not "no kernel"."""
    source = "__device__ float missing;\n__global__ void k(float* x) { x[0] = not_declared_anywhere + missing; }"
    with pytest.raises(gg.KernelCompileError, match="not_declared_anywhere") as caught:
        stream.launch(gg.Kernel(source, "missing"), 1, 1, device.zeros(1, np.float32))
    assert "has no kernel" not in str(caught.value)


NAMESPACED = r"""
namespace ops { namespace inner {
__global__ void fill(float* x, float v) { x[threadIdx.x] = v; }
template <class T> __global__ void fill_as(T* x, T v) { x[threadIdx.x] = v; }
} }
namespace { __global__ void hidden(float* x) { x[threadIdx.x] = 7.0f; } }
"""


@pytest.mark.parametrize(("name", "args", "expected"), [("ops::inner::fill", (2.0,), 2.0),
                                                         ("ops::inner::fill_as<float>", (3.0,), 3.0),
                                                         ("hidden", (), 7.0)])
def test_a_kernel_in_a_namespace_is_named_as_cpp_names_it(device, stream, name, args, expected):
    x = device.zeros(4, np.float32)
    run(stream, gg.Kernel(NAMESPACED, name), 1, 4, x, *args)
    np.testing.assert_array_equal(x.to_numpy(), [expected] * 4)


STATIC_SHARED = r"""
__global__ void reverse(const int* x, int* y) {
    static __shared__ int staged[64];
    __shared__ int last;
    staged[threadIdx.x] = x[threadIdx.x];
    if (threadIdx.x == 0) last = x[63];
    __syncthreads();
    y[threadIdx.x] = staged[63 - threadIdx.x] + last;
}
__global__ void large(float* x, int n) {
    __shared__ float staged[10000];  // 40000 bytes
    extern __shared__ float extra[];
    for (int i = threadIdx.x; i < n; i += blockDim.x) staged[i] = float(i);
    __syncthreads();
    if (threadIdx.x == 0) { extra[0] = staged[n - 1]; x[0] = extra[0]; }
}
"""
TOO_LARGE = STATIC_SHARED + r"""
__global__ void too_large(float* x) {
    __shared__ float staged[13000];  // 52000 bytes
    staged[threadIdx.x] = 1.0f;
    __syncthreads();
    x[threadIdx.x] = staged[(threadIdx.x + 1) % blockDim.x];
}
"""


def test_static_shared_memory_as_cuda_writes_it(device, stream):
    x = device.asarray(np.arange(64, dtype=np.int32))
    y = device.zeros(64, np.int32)
    run(stream, gg.Kernel(STATIC_SHARED, "reverse"), 1, 64, x, y)
    np.testing.assert_array_equal(y.to_numpy(), np.arange(64)[::-1] + 63)


def test_static_shared_memory_beyond_48_kib_is_refused_on_every_backend(device, stream):
    """CUDA's compiler refuses the whole source: the other kernels of it are refused too."""
    with pytest.raises(gg.KernelCompileError, match="too much shared data"):
        stream.launch(gg.Kernel(TOO_LARGE, "too_large"), 1, 32, device.zeros(32, np.float32))
    with pytest.raises(gg.KernelCompileError, match="too much shared data"):
        stream.launch(gg.Kernel(TOO_LARGE, "reverse"), 1, 64, device.zeros(64, np.int32), device.zeros(64, np.int32))


def test_static_and_dynamic_shared_memory_beyond_48_kib_is_refused_at_the_call(device, stream):
    kernel = gg.Kernel(STATIC_SHARED, "large")
    x = device.zeros(1, np.float32)
    run(stream, kernel, 1, 128, x, 10000, shared_mem=48 * 1024 - 40000)  # the most it may add: runs
    assert x.to_numpy()[0] == 9999.0
    refused = r"declares 40000 bytes of __shared__ variables, which with 9153 bytes of dynamic shared memory pass"
    with pytest.raises(ValueError, match=refused):
        stream.launch(kernel, 1, 128, x, 10000, shared_mem=48 * 1024 - 40000 + 1)
    graph = gg.Graph(device)
    with pytest.raises(ValueError, match=refused):
        graph.add_kernel(kernel, 1, 128, x, 10000, shared_mem=48 * 1024 - 40000 + 1)
    node = graph.add_kernel(kernel, 1, 128, x, 10000)
    with graph.instantiate() as exe:
        with pytest.raises(ValueError, match=refused):
            exe.set_params(node, shared_mem=48 * 1024 - 40000 + 1)


HALF_ARITHMETIC = r"""
#include <cuda_fp16.h>
__global__ void mul_add(const __half* a, const __half* b, __half* y, __half* total, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        __half p = a[i] * b[i];
        p += a[i];
        y[i] = -p / b[i] - a[i];
        if (a[i] > b[i]) atomicAdd(total, __float2half(1.0f));
    }
}
"""


def test_half_arithmetic_rounds_after_each_operation_as_on_a_gpu(device, stream):
    n = 256
    rng = np.random.default_rng(5)
    a = rng.uniform(-8, 8, n).astype(np.float16)
    b = rng.uniform(0.5, 4, n).astype(np.float16)
    y, total = device.zeros(n, np.float16), device.zeros(1, np.float16)
    # (-fmad=false: NVRTC would fuse the multiply and the add, half's too, rounding once; the CPU never fuses)
    kernel = gg.Kernel(HALF_ARITHMETIC, "mul_add", options=("-fmad=false",))
    run(stream, kernel, 1, n, device.asarray(a), device.asarray(b), y, total, n)
    p = a * b + a  # (NumPy's float16 arithmetic rounds after each operation, as a GPU's does)
    np.testing.assert_array_equal(y.to_numpy(), -p / b - a)
    assert total.to_numpy()[0] == np.count_nonzero(a > b)


CONVERSIONS = r"""
template <class F>
__global__ void convert(const F* x, int* rn, unsigned* rz, long long* rd, unsigned long long* ru, int n) {
    int i = threadIdx.x;
    if (i < n) {
        if constexpr (sizeof(F) == 4) {
            rn[i] = __float2int_rn(x[i]); rz[i] = __float2uint_rz(x[i]);
            rd[i] = __float2ll_rd(x[i]); ru[i] = __float2ull_ru(x[i]);
        } else {
            rn[i] = __double2int_rn(x[i]); rz[i] = __double2uint_rz(x[i]);
            rd[i] = __double2ll_rd(x[i]); ru[i] = __double2ull_ru(x[i]);
        }
    }
}
__global__ void pi_times(const double* x, double* s, double* c, float* sf, float* cf, int n) {
    int i = threadIdx.x;
    if (i < n) {
        sincospi(x[i], &s[i], &c[i]);
        sf[i] = sinpif(float(x[i]));
        cf[i] = cospif(float(x[i]));
    }
}
"""


@pytest.mark.parametrize("ctype", ["float", "double"])
def test_conversions_to_integers_saturate_and_give_nan_the_gpus_value(device, stream, ctype):
    """As PTX's cvt gives them on an H200: the nearest end of the range; NaN gives 0 from a float to 32 bits, else
    the value with only the top bit set."""
    x = np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, 2.5, -2.5, 1e20, -1e20, 0.5], np.float32 if ctype == "float"
                 else np.float64)
    n = len(x)
    outs = [device.zeros(n, t) for t in (np.int32, np.uint32, np.int64, np.uint64)]
    run(stream, gg.Kernel(CONVERSIONS, f"convert<{ctype}>"), 1, 32, device.asarray(x), *outs, n)
    i32, u32, i64, u64 = (np.iinfo(t) for t in (np.int32, np.uint32, np.int64, np.uint64))
    nan32 = (0, 0) if ctype == "float" else (i32.min, 2**31)
    np.testing.assert_array_equal(outs[0].to_numpy(), [nan32[0], i32.max, i32.min, i32.max, i32.min, 2, -2, i32.max,
                                                       i32.min, 0])
    np.testing.assert_array_equal(outs[1].to_numpy(), [nan32[1], u32.max, 0, 3000000000, 0, 2, 0, u32.max, 0, 0])
    np.testing.assert_array_equal(outs[2].to_numpy(), [i64.min, i64.max, i64.min, 3000000000, -3000000000, 2, -3,
                                                       i64.max, i64.min, 0])
    np.testing.assert_array_equal(outs[3].to_numpy(), [2**63, u64.max, 0, 3000000000, 0, 3, 0, u64.max, 0, 1])


def test_sinpi_and_cospi_reduce_their_argument_exactly(device, stream):
    """sin(pi x) for large x, exact at integers and half-integers (signed zeros as on a GPU)."""
    x = np.array([3e9, -3e9, 2.0**52 + 1, 1e15 + 0.5, 0.5, -0.5, 1.0, -1.0, 0.25, 1.0 / 3, 12345.75, -0.0], np.float64)
    n = len(x)
    s, c = device.zeros(n, np.float64), device.zeros(n, np.float64)
    sf, cf = device.zeros(n, np.float32), device.zeros(n, np.float32)
    run(stream, gg.Kernel(CONVERSIONS, "pi_times"), 1, 32, device.asarray(x), s, c, sf, cf, n)
    s, c = s.to_numpy(), c.to_numpy()
    reduced = np.remainder(x, 2.0)  # (exact), so NumPy's sin(pi r) is the reference
    np.testing.assert_allclose(s, np.sin(np.pi * reduced), rtol=0, atol=4e-16)
    np.testing.assert_allclose(c, np.cos(np.pi * reduced), rtol=0, atol=4e-16)
    # Integers: a zero sine with x's sign; half-integers: a +0 cosine and a sine of exactly 1 or -1.
    integers, halves = [0, 1, 2, 6, 7, 11], [3, 4, 5]
    assert list(s[integers]) == [0.0] * 6
    assert [math.copysign(1, v) for v in s[integers]] == [1, -1, 1, 1, -1, -1]
    assert list(c[halves]) == [0.0] * 3 and all(math.copysign(1, v) == 1 for v in c[halves])
    assert list(s[[4, 5]]) == [1.0, -1.0] and list(c[[6, 7]]) == [-1.0, -1.0]
    xf = x.astype(np.float32).astype(np.float64)
    np.testing.assert_allclose(sf.to_numpy(), np.sin(np.pi * np.remainder(xf, 2.0)), rtol=0, atol=2e-7)
    np.testing.assert_allclose(cf.to_numpy(), np.cos(np.pi * np.remainder(xf, 2.0)), rtol=0, atol=2e-7)


def test_a_relative_include_path_names_the_folder_it_named_when_the_kernel_was_made(device, stream, tmp_path,
                                                                                      monkeypatch):
    """Two folders with a header of one name: a kernel made in each reads its own, on every backend and cache."""
    source = '#include "value.h"\n__global__ void v(float* x) { x[threadIdx.x] = VALUE; }'
    kernels = []
    for value in (1, 2):
        folder = tmp_path / f"project{value}"
        (folder / "include").mkdir(parents=True)
        (folder / "include" / "value.h").write_text(f"#define VALUE {value}.0f\n")
        monkeypatch.chdir(folder)
        kernels.append(gg.Kernel(source, "v", options=("-Iinclude",)))
    assert kernels[0].options == (f"-I{tmp_path / 'project1' / 'include'}",)
    for value, kernel in zip((1, 2), kernels):
        x = device.zeros(2, np.float32)
        run(stream, kernel, 1, 2, x)
        np.testing.assert_array_equal(x.to_numpy(), [value, value])


def test_a_kernel_without_barriers_runs_as_a_plain_loop_and_one_with_them_as_fibers():
    device = gg.Device("cpu")
    plain = _load.load(gg.Kernel(QUALIFIERS, "apply"))
    fibers = _load.load(gg.Kernel(STATIC_SHARED, "reverse"))
    assert (plain._module.fibers, fibers._module.fibers) == (False, True)
    x = device.asarray(np.arange(64, dtype=np.int32))
    y = device.zeros(64, np.int32)
    run(device.stream(), gg.Kernel(STATIC_SHARED, "reverse"), 1, 64, x, y)
    np.testing.assert_array_equal(y.to_numpy(), np.arange(64)[::-1] + 63)


def test_a_cxx_that_does_not_run_is_a_clear_error_not_another_compiler(monkeypatch, tmp_path):
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))
    monkeypatch.setenv("GPUGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    _compile.compiler.cache_clear()
    try:
        source = "__global__ void lonely_cxx(float* x) { x[0] = 2.0f; }"
        device = gg.Device("cpu")
        with pytest.raises(gg.KernelCompileError, match=r"(?s)CXX='.*no-such-compiler' names none that runs.*cpu=fn"):
            device.stream().launch(gg.Kernel(source, "lonely_cxx"), 1, 1, device.zeros(1, np.float32))
    finally:
        monkeypatch.delenv("CXX")
        _compile.compiler.cache_clear()


def test_an_unwritable_cache_compiles_into_a_temporary_folder_that_is_removed(monkeypatch, tmp_path):
    (tmp_path / "not-a-folder").write_text("")
    monkeypatch.setenv("GPUGRAPH_CACHE_DIR", str(tmp_path / "not-a-folder"))
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setattr(_compile.tempfile, "tempdir", str(temporary))
    device = gg.Device("cpu")
    x = device.zeros(1, np.float32)
    run(device.stream(), gg.Kernel("__global__ void nowhere(float* x) { x[0] = 3.0f; }", "nowhere"), 1, 1, x)
    assert x.to_numpy()[0] == 3.0
    assert list(temporary.iterdir()) == []


SHARED_STATE = r"""
__device__ int counter;
__global__ void never_defined(int* x);
__global__ void bump() { atomicAdd(&counter, 1); }
__global__ void fetch(int* out) { out[0] = counter; }
"""


def test_the_kernels_of_a_source_share_its_device_variables_beside_one_that_does_not_compile(device, stream):
    """A kernel declared and never defined, and a misspelt name asked for in between: the others still compile
    into one module, so that they share `counter`."""
    run(stream, gg.Kernel(SHARED_STATE, "bump"), 1, 5)
    with pytest.raises(gg.KernelCompileError, match="fetchh"):
        stream.launch(gg.Kernel(SHARED_STATE, "fetchh"), 1, 1, device.zeros(1, np.int32))
    out = device.zeros(1, np.int32)
    run(stream, gg.Kernel(SHARED_STATE, "fetch"), 1, 1, out)
    assert out.to_numpy()[0] == 5


def test_a_kernel_declared_and_never_defined_is_named_so_on_the_cpu():
    device = gg.Device("cpu")
    with pytest.raises(gg.KernelCompileError, match="the kernel is declared in the source but never defined"):
        device.stream().launch(gg.Kernel(SHARED_STATE, "never_defined"), 1, 1, device.zeros(1, np.int32))


@pytest.mark.parametrize("name", ["ops :: inner :: fill", "::ops::inner::fill"])
def test_a_qualified_name_is_normalized_as_the_reader_lists_it(device, stream, name):
    kernel = gg.Kernel(NAMESPACED, name)
    assert kernel.name == "ops::inner::fill"
    x = device.zeros(4, np.float32)
    run(stream, kernel, 1, 4, x, 6.0)
    np.testing.assert_array_equal(x.to_numpy(), [6.0] * 4)


def test_a_missing_name_in_a_namespace_is_no_kernel_on_every_backend(device, stream):
    with pytest.raises(gg.KernelCompileError, match=r"the compiled module has no kernel 'ops::inner::missing'"):
        stream.launch(gg.Kernel(NAMESPACED, "ops::inner::missing"), 1, 1, device.zeros(1, np.float32))


FILE_SCOPE_SHARED = r"""
__shared__ float staged[13000];  // 52000 bytes at file scope
__global__ void uses_it(float* x) {
    staged[threadIdx.x] = 1.0f;
    __syncthreads();
    x[threadIdx.x] = staged[(threadIdx.x + 1) % blockDim.x];
}
__global__ void in_a_lambda(float* x) {
    auto stage = [&]() { __shared__ float inner[13000]; inner[threadIdx.x] = 2.0f; __syncthreads(); return inner[0]; };
    x[threadIdx.x] = stage();
}
"""


@pytest.mark.parametrize("name", ["uses_it", "in_a_lambda"])
def test_shared_memory_at_file_scope_or_in_a_lambda_counts_on_every_backend(device, stream, name):
    with pytest.raises(gg.KernelCompileError, match="too much shared data"):
        stream.launch(gg.Kernel(FILE_SCOPE_SHARED, name), 1, 32, device.zeros(32, np.float32))


HFMA = r"""
#include <cuda_fp16.h>
__global__ void hfma(const __half* a, const __half* b, const __half* c, __half* y) {
    y[threadIdx.x] = __hfma(a[threadIdx.x], b[threadIdx.x], c[threadIdx.x]);
}
"""


def test_hfma_rounds_once_as_on_a_gpu(device, stream):
    # a * b + c = 1 + 2^-10 + 2^-11 - 2^-31: rounded once to half, 1 + 2^-10; rounded to float first, a tie that
    # half's rounding takes to even, 1 + 2^-9.
    a = np.array([2.0**-11 * (1 + 2.0**-10)], np.float16)
    b = np.array([1 - 2.0**-10], np.float16)
    c = np.array([1 + 2.0**-10], np.float16)
    y = device.zeros(1, np.float16)
    run(stream, gg.Kernel(HFMA, "hfma"), 1, 1, device.asarray(a), device.asarray(b), device.asarray(c), y)
    exact = a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)
    assert y.to_numpy()[0] == exact.astype(np.float16)[0]
