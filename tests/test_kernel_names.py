"""A kernel name the source certainly lacks is refused when the Kernel is made, listing the kernels the source has,
on every backend: before, a misspelled name first surfaced as a refusal of the arguments (a kernel of unknown
signature takes only arguments of their own types) and the compiler's "no kernel" came later. Only certain cases
are refused: where a header, macro pasting or an option could make the name, the Kernel is made as before and the
compiler has the last word."""

from __future__ import annotations

import numpy as np
import pytest

import gpugraph as gg

SOURCE = r"""
// kk is a word of this comment only, and "kk" of this string
__global__ void k(float* x, float v) { x[threadIdx.x] = v; }
template <typename T> __global__ void axpb(T* x, T a) { x[threadIdx.x] = a * x[threadIdx.x] + (T) 1; }
namespace ops { extern "C" __global__ void fill(float* x) { x[threadIdx.x] = 7.0f; } }
__device__ float twice(float v) { return 2.0f * v; }
"""
HAS = r"\(it has: axpb<\.\.\.>, k, ops::fill\)"


@pytest.mark.parametrize("name", ["kk", "K", "axpbb<float>", "ops::kk", "fil"])
def test_a_name_the_source_lacks_is_refused_when_the_kernel_is_made(name):
    with pytest.raises(gg.KernelCompileError, match=rf"the compiled module has no kernel '{name}': no `__global__ "
                                                    rf"void {name}\(\.\.\.\)` in the source .*\n{HAS}$"):
        gg.Kernel(SOURCE, name)


def test_the_new_user_s_mistake_is_named_before_any_argument(device):
    # (A float argument for a kernel of unknown signature was refused first: "arguments must be Arrays or NumPy
    # scalars". Now the Kernel itself is refused, and says which kernels there are.)
    with pytest.raises(gg.KernelCompileError, match=r"no kernel 'kk'.*\n\(it has: k\)$"):
        kernel = gg.Kernel("__global__ void k(float* x, float v) { x[threadIdx.x] = v; }", "kk")
        device.stream().launch(kernel, 1, 4, device.zeros(4, np.float32), 2.0)


def test_a_source_without_kernels_says_so():
    with pytest.raises(gg.KernelCompileError, match=r"\n\(it has: no __global__ function\)$"):
        gg.Kernel("__device__ float f(float v) { return v; }", "g")


@pytest.mark.parametrize("name, values", [("k", [3.0] * 4), ("axpb<float>", [1.0] * 4), ("ops::fill", [7.0] * 4)])
def test_names_the_source_has_are_made_and_run(device, name, values):
    kernel = gg.Kernel(SOURCE, name)
    x = device.zeros(4, np.float32)
    stream = device.stream()
    stream.launch(kernel, 1, 4, x, *([np.float32(3.0)] if name == "k" else [np.float32(5.0)] if "<" in name else []))
    stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), values)


PASTED = r"""
#define KERNEL(name) extern "C" __global__ void name##_kernel(float* x) { x[threadIdx.x] = 5.0f; }
KERNEL(fill)
"""


def test_a_name_made_by_pasting_is_left_to_the_compiler(device):
    kernel = gg.Kernel(PASTED, "fill_kernel")  # (the source never spells it: ## makes it)
    x = device.zeros(4, np.float32)
    stream = device.stream()
    stream.launch(kernel, 1, 4, x)
    stream.synchronize()
    np.testing.assert_array_equal(x.to_numpy(), [5.0] * 4)
    with pytest.raises(gg.KernelCompileError, match=r"the compiled module has no kernel 'other_kernel'"):
        stream.launch(gg.Kernel(PASTED, "other_kernel"), 1, 4, x)  # (made: refused by the compiler, at first use)


def test_a_name_a_header_or_an_option_may_declare_is_left_to_the_compiler(tmp_path):
    (tmp_path / "more.cuh").write_text("__global__ void from_header(float* x) { x[0] = 1.0f; }\n")
    with_header = '#include "more.cuh"\n' + SOURCE
    kernel = gg.Kernel(with_header, "from_header", options=(f"-I{tmp_path}",))  # (made: the header may declare it)
    assert kernel.signature is None
    gg.Kernel(with_header, "missing", options=(f"-I{tmp_path}",))
    # Only headers known to declare no kernel leave the answer certain, and only without an include path that could
    # put another header under their names.
    with pytest.raises(gg.KernelCompileError, match=r"no kernel 'missing'"):
        gg.Kernel("#include <cuda_fp16.h>\n" + SOURCE, "missing")
    gg.Kernel("#include <cuda_fp16.h>\n" + SOURCE, "missing", options=(f"-I{tmp_path}",))
    gg.Kernel(SOURCE.replace("void k(", "void KNAME("), "missing", options=("-DKNAME=missing",))
    gg.Kernel(SOURCE, "missing", options=("--pre-include=more.cuh",))


def test_names_the_compiler_knows_otherwise_are_left_to_it():
    gg.Kernel(SOURCE, "_Z1kPff")  # (a mangled name, as CUDA's module knows a C++ kernel)
    gg.Kernel(SOURCE, "twice")  # (spelled in the source: a __device__ function, which the first use refuses)
    gg.Kernel(SOURCE + "#define NAME k2\n__global__ void NAME(float* x) {}\n", "k2")
    gg.Kernel("__global__ void k\\u0032(float* x) {}", "k2")  # (a universal character name spells it)


def test_a_name_spelled_only_in_comments_and_literals_is_refused():
    with pytest.raises(gg.KernelCompileError, match=r"no kernel 'kk'"):
        gg.Kernel(SOURCE, "kk")  # (SOURCE spells kk in a comment and a string)
