"""Kernels that come as compiled code, not source: a Module's kernels (PTX, cubin; hipModuleLoad, hipModuleLoadData,
hipModuleGetFunction) and another library's compiled function (a CUfunction, CuPy's RawKernel), given their C
signature. They launch, make nodes, take setters, Params and captures as source kernels do. The CPU backend runs
them only through a Python implementation (cpu=), and refuses them otherwise.

The tests that need code for a GPU make it at test time: hand-written PTX (ISA 7.0, for any GPU from sm_75, which
any driver of CUDA 11 or newer loads) and cubins from NVRTC for the device's architecture. Every result is checked
against NumPy.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import gpugraph as gg

N = 40
GRID, BLOCK = 2, 32

# y = a * x + y, y *= a and y += offset (a module variable), over n elements.
PTX = r"""
//
// Hand-written for gpugraph's tests.
//
.version 7.0
.target sm_75
.address_size 64

.visible .global .align 4 .f32 offset;

.visible .entry axpy(
    .param .u64 axpy_param_0,
    .param .u64 axpy_param_1,
    .param .f32 axpy_param_2,
    .param .u32 axpy_param_3
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .f32 %f<5>;
    .reg .b64 %rd<8>;

    ld.param.u64 %rd1, [axpy_param_0];
    ld.param.u64 %rd2, [axpy_param_1];
    ld.param.f32 %f1, [axpy_param_2];
    ld.param.u32 %r2, [axpy_param_3];
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mov.u32 %r5, %tid.x;
    mad.lo.s32 %r1, %r3, %r4, %r5;
    setp.ge.s32 %p1, %r1, %r2;
    @%p1 bra $L__axpy_done;
    cvta.to.global.u64 %rd3, %rd2;
    cvta.to.global.u64 %rd4, %rd1;
    mul.wide.s32 %rd5, %r1, 4;
    add.s64 %rd6, %rd3, %rd5;
    add.s64 %rd7, %rd4, %rd5;
    ld.global.f32 %f2, [%rd6];
    ld.global.f32 %f3, [%rd7];
    fma.rn.f32 %f4, %f1, %f2, %f3;
    st.global.f32 [%rd7], %f4;
$L__axpy_done:
    ret;
}

.visible .entry scale(
    .param .u64 scale_param_0,
    .param .f32 scale_param_1,
    .param .u32 scale_param_2
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<5>;

    ld.param.u64 %rd1, [scale_param_0];
    ld.param.f32 %f1, [scale_param_1];
    ld.param.u32 %r2, [scale_param_2];
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mov.u32 %r5, %tid.x;
    mad.lo.s32 %r1, %r3, %r4, %r5;
    setp.ge.s32 %p1, %r1, %r2;
    @%p1 bra $L__scale_done;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.s32 %rd3, %r1, 4;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.f32 %f2, [%rd4];
    mul.rn.f32 %f3, %f2, %f1;
    st.global.f32 [%rd4], %f3;
$L__scale_done:
    ret;
}

.visible .entry add_offset(
    .param .u64 add_offset_param_0,
    .param .u32 add_offset_param_1
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<5>;

    ld.param.u64 %rd1, [add_offset_param_0];
    ld.param.u32 %r2, [add_offset_param_1];
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mov.u32 %r5, %tid.x;
    mad.lo.s32 %r1, %r3, %r4, %r5;
    setp.ge.s32 %p1, %r1, %r2;
    @%p1 bra $L__add_offset_done;
    ld.global.f32 %f1, [offset];
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.s32 %rd3, %r1, 4;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.f32 %f2, [%rd4];
    add.rn.f32 %f3, %f2, %f1;
    st.global.f32 [%rd4], %f3;
$L__add_offset_done:
    ret;
}
"""
AXPY = "float* y, const float* x, float a, int n"
SCALE = 'extern "C" __global__ void scale(float* y, float a, int n)'  # (a declaration reads as its parameters)

# The same kernels as source, for NVRTC's cubin: one extern "C", one a template known by its mangled name.
SOURCE = r"""
extern "C" __global__ void axpy(float* y, const float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
template <typename T> __global__ void twice(T* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = y[i] * 2;
}
"""


def covered(launch, n):
    """The elements a 1-D launch of a bounds-checked kernel over ``n`` writes."""
    return min(int(n), launch.grid[0] * launch.block[0])


def axpy_cpu(launch, y, x, a, n):
    count = covered(launch, n)
    y[:count] = a * x[:count] + y[:count]


def scale_cpu(launch, y, a, n):
    y[:covered(launch, n)] *= a


X0 = np.arange(N, dtype=np.float32)
Y0 = np.full(N, 0.5, np.float32)  # (small integers and halves: a fused multiply-add rounds as NumPy does)


@pytest.fixture
def module():
    return gg.Module(PTX)


@pytest.fixture
def cuda_device(gpu_device: gg.Device) -> gg.Device:
    if gpu_device.backend != "cuda":
        pytest.skip(f"compiled CUDA code needs the cuda backend, got {gpu_device.backend}")
    return gpu_device


# Every backend: a Module's kernels (PTX on CUDA, their Python implementations on the CPU backend)


def test_a_module_kernel_launches_on_a_stream(device, stream, module):
    axpy = module.function("axpy", AXPY, cpu=axpy_cpu)
    assert (axpy.name, axpy.module, axpy.source, axpy.from_source) == ("axpy", module, "", False)
    assert [str(p) for p in axpy.signature] == ["float* y", "float* x", "float a", "int n"]
    x, y = device.asarray(X0), device.asarray(Y0)
    stream.launch(axpy, GRID, BLOCK, y, x, 2.0, N)
    stream.launch(axpy, GRID, BLOCK, y, x, np.float32(-0.5), np.int32(N // 2))
    stream.synchronize()
    expected = 2 * X0 + Y0
    expected[:N // 2] += -0.5 * X0[:N // 2]
    np.testing.assert_array_equal(y.to_numpy(), expected)


def test_a_module_kernel_as_a_node_with_params_and_setters(device, stream, module):
    axpy = module.function("axpy", AXPY, cpu=axpy_cpu)
    scale = module.function("scale", SCALE, cpu=scale_cpu)
    x, y = device.asarray(X0), device.asarray(Y0)
    a = gg.Param(2.0)
    g = gg.Graph(device)
    first = g.add_kernel(axpy, GRID, BLOCK, y, x, a, N)  # y = a * x + y
    second = g.add_kernel(scale, GRID, BLOCK, y, 3.0, N, after=first)  # y *= 3
    assert first.params.kernel is axpy
    with g.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
        np.testing.assert_array_equal(y.to_numpy(), (2 * X0 + Y0) * 3)
        a.value = -1.0  # (patched at the next launch)
        stream.memcpy(y, Y0)
        exe.launch(stream)
        stream.synchronize()
        np.testing.assert_array_equal(y.to_numpy(), (-X0 + Y0) * 3)
        # The executable graph's node set to another kernel of the module, then back with new arguments
        exe.set_params(first, y, 0.5, N, kernel=scale)
        stream.memcpy(y, Y0)
        exe.launch(stream)
        stream.synchronize()
        np.testing.assert_array_equal(y.to_numpy(), Y0 * 0.5 * 3)
        exe.set_params(first, y, x, 1.0, N, kernel=axpy)
        exe.set_params(second, y, 2.0, N // 2)
        stream.memcpy(y, Y0)
        exe.launch(stream)
        stream.synchronize()
    expected = X0 + Y0
    expected[:N // 2] *= 2
    np.testing.assert_array_equal(y.to_numpy(), expected)
    # ... and the graph's own node set to the other kernel (Graph.set_params), which a new executable graph takes
    g.set_params(first, y, 4.0, N, kernel=scale)
    assert first.params.kernel is scale
    with g.instantiate() as exe:
        stream.memcpy(y, Y0)
        exe.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(y.to_numpy(), Y0 * 4 * 3)


def test_a_module_kernel_in_a_captured_function(device, module):
    axpy = module.function("axpy", AXPY, cpu=axpy_cpu)

    @gg.captured(dynamic=("a",))
    def step(y, x, a):
        gg.current_stream(y.device).launch(axpy, GRID, BLOCK, y, x, a, N)

    x, y = device.asarray(X0), device.asarray(Y0)
    gg.current_stream(device).launch(axpy, GRID, BLOCK, y, x, 0.0, N)  # (loaded before any capture: y unchanged)
    step(y, x, 1.0)
    step(y, x, 2.0)  # (a replay with a patched)
    gg.current_stream(device).synchronize()
    np.testing.assert_array_equal(y.to_numpy(), 3 * X0 + Y0)
    assert step.stats.captures == 1 and step.stats.replays == 1


def test_a_module_kernel_without_a_signature_takes_arguments_of_their_own_types(device, stream, module):
    scale = module.function("scale", cpu=scale_cpu)
    assert scale.signature is None
    y = device.asarray(Y0)
    stream.launch(scale, GRID, BLOCK, y, np.float32(4.0), np.int32(N))
    stream.synchronize()
    np.testing.assert_array_equal(y.to_numpy(), Y0 * 4)
    with pytest.raises(TypeError, match=r"Kernel\('scale'\) argument 1: it was made without signature= \(compiled "
                                        r"code carries no C types\), so arguments must be Arrays or NumPy scalars; "
                                        r"got float"):
        stream.launch(scale, GRID, BLOCK, y, 4.0, N)


def test_a_kernel_of_another_library_s_function(device, stream, module):
    """Kernel.from_function: on CUDA the CUfunction the driver gave (cuModuleLoadData, cuModuleGetFunction), as
    cuda-bindings' handle and as an int; on the CPU backend its Python implementation."""
    handle = driver_function(device, PTX.encode(), "axpy") if device.backend == "cuda" else 0x1000
    for given in (handle, int(handle)):
        axpy = gg.Kernel.from_function(given, AXPY, device=device, cpu=axpy_cpu)
        assert (axpy.handle, axpy.device, axpy.module, axpy.from_source) == (int(handle), device, None, False)
        x, y = device.asarray(X0), device.asarray(Y0)
        stream.launch(axpy, GRID, BLOCK, y, x, 2.0, N)
        a = gg.Param(1.0)
        g = gg.Graph(device)
        node = g.add_kernel(axpy, GRID, BLOCK, y, x, a, N)
        with g.instantiate() as exe:
            exe.launch(stream)  # y = 3x + y0
            a.value = -2.0
            exe.launch(stream)  # y = x + y0
            exe.set_params(node, y, x, 0.5, N // 2)
            exe.launch(stream)
            stream.synchronize()
        expected = X0 + Y0
        expected[:N // 2] += 0.5 * X0[:N // 2]
        np.testing.assert_array_equal(y.to_numpy(), expected)
    named = gg.Kernel.from_function(handle, 'extern "C" __global__ void axpy(float* y, const float* x, float a, int n)',
                                    device=device, cpu=axpy_cpu)
    assert repr(named) == "Kernel('axpy')" and len(named.signature) == 4
    assert repr(gg.Kernel.from_function(handle, device=device, name="mine")) == "Kernel('mine')"


# The CPU backend


def test_the_cpu_backend_refuses_compiled_code_without_a_python_implementation(module):
    device = gg.Device("cpu")
    stream = device.stream()
    axpy = module.function("axpy", AXPY)
    x, y = device.asarray(X0), device.asarray(Y0)
    refusal = (r"Kernel\('axpy'\) is GPU code of Module\(<PTX, \d+ bytes>\), which the CPU backend cannot run: .* give "
               r"the kernel a Python implementation, Module\(<PTX, \d+ bytes>\)\.function\('axpy', \.\.\., cpu=fn\), "
               r"called as fn\(launch, \*args\), or make it from its source")
    with pytest.raises(gg.GpuGraphError, match=refusal):
        stream.launch(axpy, GRID, BLOCK, y, x, 2.0, N)
    g = gg.Graph(device)
    with pytest.raises(gg.GpuGraphError, match=refusal):
        g.add_kernel(axpy, GRID, BLOCK, y, x, 2.0, N)
    assert len(g) == 0
    foreign = gg.Kernel.from_function(0x1000, AXPY, device=device)
    with pytest.raises(gg.GpuGraphError, match=r"Kernel\('CUfunction 0x1000'\) is another library's compiled GPU "
                                               r"function, which the CPU backend cannot run: .*Kernel\.from_function"
                                               r"\(\.\.\., cpu=fn\)"):
        stream.launch(foreign, GRID, BLOCK, y, x, 2.0, N)
    with pytest.raises(gg.GpuGraphError, match="which the CPU backend cannot run"):
        device.symbol(module.function("add_offset", "float* y, int n"), "offset", dtype=np.float32)
    stream.synchronize()
    np.testing.assert_array_equal(y.to_numpy(), Y0)  # (nothing ran)


# Bad arguments, refused on every backend at the call that gives them


def test_a_module_takes_a_path_bytes_or_ptx_text(tmp_path):
    path = tmp_path / "kernels.ptx"
    path.write_text(PTX)
    for image in (path, str(path)):
        loaded = gg.Module(image)
        assert repr(loaded) == f"Module({str(path)!r})" and loaded.format == "PTX"
        assert loaded.image == PTX.encode() + b"\0"  # (the NUL the driver reads PTX up to)
    assert gg.Module(PTX.encode() + b"\0").image == PTX.encode() + b"\0"
    assert gg.Module(bytearray(b"\x7fELF\x02\x01")).format == "cubin"
    assert gg.Module(memoryview(b"\x50\xed\x55\xba\x01\x00")).format == "fatbin"
    assert repr(gg.Module(b"\x7fELF\x02\x01")) == "Module(<cubin, 6 bytes>)"
    with pytest.raises(TypeError, match=r"^Module: image must be a path \(str or os.PathLike\) of a PTX, cubin or "
                                        r"fatbin file, or the code as bytes \(or PTX text as a str\), got int$"):
        gg.Module(3)
    with pytest.raises(ValueError, match=r"^Module: the code given is empty$"):
        gg.Module(b"")
    with pytest.raises(FileNotFoundError, match=r"^Module: cannot read the module file '\S*missing.cubin': No such "
                                                r"file or directory \(a str without line breaks is a file's path; "
                                                r"give PTX text as a str of its lines, or the code as bytes\)$"):
        gg.Module(str(tmp_path / "missing.cubin"))


def test_a_module_s_function_names_and_signatures_are_checked(module):
    with pytest.raises(ValueError, match=r"^Module\(<PTX, \d+ bytes>\)\.function: the PTX has no kernel 'axpyy' "
                                         r"\(it has: add_offset, axpy, scale\); a C\+\+ kernel's name there is its "
                                         r"mangled name \(_Z\.\.\.\) unless it is declared extern \"C\"$"):
        module.function("axpyy", AXPY)
    with pytest.raises(TypeError, match=r"\.function: name must be a str, the kernel's name in the compiled code, "
                                        r"got 3$"):
        module.function(3)
    with pytest.raises(ValueError, match=r"\.function: name must be the kernel's name as the compiled code spells it"
                                         r".* got 'axpy\(float\*\)'$"):
        module.function("axpy(float*)")
    with pytest.raises(ValueError, match=r"\.function: signature 'float\* y,, int n' has an empty parameter"):
        module.function("axpy", "float* y,, int n")
    with pytest.raises(ValueError, match=r"\.function: gpugraph cannot read the kernel's parameters from signature "
                                         r"'float\* y, \.\.\.': give them as a C parameter list"):
        module.function("axpy", "float* y, ...")
    with pytest.raises(TypeError, match=r"\.function: signature must be a str holding the kernel's C parameters"):
        module.function("axpy", ["float* y"])
    with pytest.raises(TypeError, match=r"\.function: cpu must be callable or None, got str"):
        module.function("axpy", AXPY, cpu="axpy")
    # A module's code that is not PTX lists no kernels: its names are the driver's to check, once loaded.
    assert gg.Module(b"\x7fELF\x02\x01").function("anything", AXPY).name == "anything"


def test_signatures_read_as_parameter_lists_or_declarations():
    def read(signature):
        return [(p.ctype, p.pointer, p.dtype) for p in gg.Module(PTX).function("axpy", signature).signature]

    listed = read(AXPY)
    assert listed == [("float*", True, np.float32), ("float*", True, np.float32), ("float", False, np.float32),
                      ("int", False, np.int32)]
    for declaration in ('extern "C" __global__ void axpy(float* y, const float* x, float a, int n);',
                        "void axpy(float* y, const float* x, float a, int n)",
                        "__global__ void __launch_bounds__(256) axpy(float* __restrict__ y, const float* x, float a, "
                        "int n) { y[0] = a; }",
                        "float*, const float*, float, int"):
        assert read(declaration) == listed
    assert read("") == read("void") == []
    assert read("template <typename T> __global__ void k(T* y, size_t n)") == [("T*", True, None),
                                                                               ("size_t", False, np.uint64)]


def test_arguments_are_checked_by_the_signature_given(device, stream, module):
    axpy = module.function("axpy", AXPY, cpu=axpy_cpu)
    y = device.asarray(Y0)
    with pytest.raises(TypeError, match=r"^Kernel\('axpy'\) takes 4 arguments \(float\* y, float\* x, float a, int "
                                        r"n\), got 3$"):
        stream.launch(axpy, GRID, BLOCK, y, 2.0, N)
    with pytest.raises(TypeError, match=r"^Kernel\('axpy'\) argument 1 \(float\* x\): expects float32 data, got an "
                                        r"Array of int32$"):
        stream.launch(axpy, GRID, BLOCK, y, device.zeros(N, np.int32), 2.0, N)
    with pytest.raises(TypeError, match=r"argument 3 \(int n\): .*2\.5"):
        gg.Graph(device).add_kernel(axpy, GRID, BLOCK, y, y, 2.0, 2.5)


def test_another_library_s_function_is_checked(device):
    with pytest.raises(TypeError, match=r"^Kernel\.from_function: handle must be a CUfunction: its address as an int, "
                                        r"a cuda\.bindings\.driver\.CUfunction, or CuPy's RawKernel or cupy\.cuda\."
                                        r"Function \(for Numba, Triton and other libraries, pass their CUfunction as "
                                        r"an int\), got str$"):
        gg.Kernel.from_function("axpy", AXPY, device=device)
    for null in (0, -5, True):
        with pytest.raises(ValueError, match=r"^Kernel\.from_function: handle must be a loaded function, got .* \(a "
                                             r"CUfunction's address is a positive 64-bit number\)$"):
            gg.Kernel.from_function(null, AXPY, device=device)
    with pytest.raises(TypeError, match=r"^Kernel\.from_function: device must be the gg\.Device the function was "
                                        r"loaded on \(CUfunctions belong to one device's context\), got 'cuda:0'$"):
        gg.Kernel.from_function(0x1000, AXPY, device="cuda:0")
    with pytest.raises(TypeError, match=r"device"):
        gg.Kernel.from_function(0x1000, AXPY)  # (keyword-only, and required)
    with pytest.raises(ValueError, match=r"^Kernel\.from_function: signature 'float\* y,' has an empty parameter"):
        gg.Kernel.from_function(0x1000, "float* y,", device=device)
    with pytest.raises(ValueError, match=r"^Kernel\.from_function: name must be the kernel's name"):
        gg.Kernel.from_function(0x1000, AXPY, device=device, name="a b")
    # Its arguments are checked by its signature, under the name it declares, before anything loads
    declared = gg.Kernel.from_function(0x1000, 'extern "C" __global__ void half(float* y, int n)', device=device)
    with pytest.raises(TypeError, match=r"^Kernel\('half'\) argument 1 \(int n\): "):
        device.stream().launch(declared, GRID, BLOCK, device.zeros(N, np.float32), 2.5)


# CUDA: PTX, cubins, other libraries' functions


def nvrtc_cubin(device, source, names=()):
    """``source`` compiled by NVRTC into a cubin for ``device``'s architecture, and the lowered (mangled) name of each
    name expression in ``names``."""
    cu = pytest.importorskip("cuda.bindings.driver")
    nvrtc = pytest.importorskip("cuda.bindings.nvrtc")

    def check(result):
        assert result[0] == nvrtc.nvrtcResult.NVRTC_SUCCESS, result[0]
        return result[1] if len(result) > 1 else None

    dev = check_driver(cu, cu.cuDeviceGet(device.index))
    major = check_driver(cu, cu.cuDeviceGetAttribute(
        cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev))
    minor = check_driver(cu, cu.cuDeviceGetAttribute(
        cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev))
    program = check(nvrtc.nvrtcCreateProgram(source.encode(), b"modules_test.cu", 0, [], []))
    try:
        for name in names:
            check(nvrtc.nvrtcAddNameExpression(program, name.encode()))
        options = [f"--gpu-architecture=sm_{major}{minor}".encode()]
        (status,) = nvrtc.nvrtcCompileProgram(program, len(options), options)
        if status != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            size = check(nvrtc.nvrtcGetProgramLogSize(program))
            log = b" " * size
            check(nvrtc.nvrtcGetProgramLog(program, log))
            pytest.fail(f"NVRTC: {log.decode(errors='replace')}")
        size = check(nvrtc.nvrtcGetCUBINSize(program))
        cubin = b" " * size
        check(nvrtc.nvrtcGetCUBIN(program, cubin))
        lowered = {name: check(nvrtc.nvrtcGetLoweredName(program, name.encode())).decode() for name in names}
    finally:
        nvrtc.nvrtcDestroyProgram(program)
    return cubin, lowered


def check_driver(cu, result):
    assert result[0] == cu.CUresult.CUDA_SUCCESS, result[0]
    return result[1] if len(result) > 1 else None


# Modules the tests load with the driver directly: kept loaded for the process, as gpugraph keeps the functions it
# was given (the driver would give an unloaded function's address to another).
_LOADED: list = []


def driver_function(device, image, name):
    """The CUfunction ``name`` of ``image`` (NUL-terminated PTX, or a cubin) loaded by the driver itself in
    ``device``'s primary context, as another library would load it."""
    cu = pytest.importorskip("cuda.bindings.driver")
    dev = check_driver(cu, cu.cuDeviceGet(device.index))
    context = check_driver(cu, cu.cuDevicePrimaryCtxRetain(dev))
    before = check_driver(cu, cu.cuCtxGetCurrent())
    check_driver(cu, cu.cuCtxSetCurrent(context))
    try:
        loaded = check_driver(cu, cu.cuModuleLoadData(image + b"\0" if not image.endswith(b"\0") else image))
        _LOADED.append(loaded)
        return check_driver(cu, cu.cuModuleGetFunction(loaded, name.encode()))
    finally:
        check_driver(cu, cu.cuCtxSetCurrent(before))  # (gpugraph keeps track of the context it made current)


@pytest.mark.gpu
def test_a_cubin_s_extern_c_and_mangled_kernels(cuda_device):
    cubin, lowered = nvrtc_cubin(cuda_device, SOURCE, ["twice<float>"])
    mangled = lowered["twice<float>"]
    assert mangled.startswith("_Z")
    compiled = gg.Module(cubin)
    assert compiled.format == "cubin"
    axpy = compiled.function("axpy", AXPY)
    twice = compiled.function(mangled, "float* y, int n")  # (the name as the cubin spells it)
    stream = cuda_device.stream()
    x, y = cuda_device.asarray(X0), cuda_device.asarray(Y0)
    stream.launch(axpy, GRID, BLOCK, y, x, 2.0, N)
    stream.launch(twice, GRID, BLOCK, y, N)
    stream.synchronize()
    np.testing.assert_array_equal(y.to_numpy(), (2 * X0 + Y0) * 2)
    # As nodes, one set to the other kernel of the module and back
    a = gg.Param(1.0)
    g = gg.Graph(cuda_device)
    node = g.add_kernel(axpy, GRID, BLOCK, y, x, a, N)
    with g.instantiate() as exe:
        stream.memcpy(y, Y0)
        exe.launch(stream)
        a.value = 3.0
        exe.launch(stream)
        stream.synchronize()
        np.testing.assert_array_equal(y.to_numpy(), 4 * X0 + Y0)
        exe.set_params(node, y, N // 2, kernel=twice)
        exe.launch(stream)
        stream.synchronize()
        expected = 4 * X0 + Y0
        expected[:N // 2] *= 2
        np.testing.assert_array_equal(y.to_numpy(), expected)


@pytest.mark.gpu
def test_a_ptx_module_s_kernels_share_its_variables(cuda_device, module):
    add_offset = module.function("add_offset", "float* y, int n")
    scale = module.function("scale", SCALE)
    offset = cuda_device.symbol(add_offset, "offset", dtype=np.float32)  # (cuModuleGetGlobal of the module)
    assert (offset.shape, offset.dtype) == ((1,), np.float32)
    stream = cuda_device.stream()
    stream.memcpy(offset, np.array([1.5], np.float32))
    y = cuda_device.asarray(Y0)
    stream.launch(scale, GRID, BLOCK, y, 2.0, N)  # (the module, loaded once for both kernels)
    stream.launch(add_offset, GRID, BLOCK, y, N)
    stream.synchronize()
    np.testing.assert_array_equal(y.to_numpy(), Y0 * 2 + 1.5)
    np.testing.assert_array_equal(cuda_device.symbol(scale, "offset", dtype=np.float32).to_numpy(), [1.5])


@pytest.mark.gpu
def test_code_the_driver_refuses_is_named_with_the_driver_s_error(cuda_device):
    broken = gg.Module(b"this is no module")
    kernel = broken.function("axpy", AXPY)
    y = cuda_device.asarray(Y0)
    with pytest.raises(gg.BackendError, match=r"^cuda: cuModuleLoadData failed: CUDA_ERROR_\w+ \(\d+\): .*: "
                                              r"Module\(<code, 18 bytes>\) cannot be loaded on cuda:\d+, a device of "
                                              r"compute capability \d+\.\d+: give it PTX the driver can "
                                              r"compile .*, or a cubin or fatbin holding code for sm_\d+$") as caught:
        cuda_device.stream().launch(kernel, GRID, BLOCK, y, y, 2.0, N)
    assert caught.value.api == "cuModuleLoadData"
    np.testing.assert_array_equal(y.to_numpy(), Y0)


@pytest.mark.gpu
def test_a_name_the_cubin_lacks_is_refused_with_its_kernels(cuda_device):
    cubin, lowered = nvrtc_cubin(cuda_device, SOURCE, ["twice<float>"])
    missing = gg.Module(cubin).function("twice", "float* y, int n")  # (a C++ kernel: the cubin has its mangled name)
    y = cuda_device.asarray(Y0)
    refusal = (rf"^Module\(<cubin, \d+ bytes>\)\.function\('twice'\): the module loaded on cuda:\d+ has no kernel "
               rf"'twice' \(it has: [^)]*{re.escape(lowered['twice<float>'])}[^)]*\); a C\+\+ kernel's name there is "
               rf"its mangled name \(_Z\.\.\.\) unless it is declared extern \"C\"$")
    with pytest.raises(ValueError, match=refusal) as caught:
        cuda_device.stream().launch(missing, GRID, BLOCK, y, N)
    assert "axpy" in str(caught.value)


@pytest.mark.gpu
def test_a_signature_that_disagrees_with_the_compiled_kernel_is_refused(cuda_device, module):
    y = cuda_device.asarray(Y0)
    stream = cuda_device.stream()
    short = module.function("axpy", "float* y, float a")
    with pytest.raises(ValueError, match=r"^Kernel\('axpy'\) \(signature='float\* y, float a'\): gpugraph refuses to "
                                         r"load it: the signature given reads as 2 parameters \(float\* y, float a\), "
                                         r"but the compiled kernel takes 4 \(of 8, 8, 4, 4 bytes\); give the kernel's "
                                         r"parameters as it declares them \(signature=\)$"):
        stream.launch(short, GRID, BLOCK, y, 2.0)
    wide = module.function("axpy", "float* y, const float* x, double a, int n")
    with pytest.raises(ValueError, match=r"parameter 2 \(double a\) reads from the signature given as float64 \(8 "
                                         r"bytes\), but the compiled kernel takes 4 bytes; give its C type as the "
                                         r"kernel declares it \(signature=\)$"):
        stream.launch(wide, GRID, BLOCK, y, y, 2.0, N)
    untyped = module.function("axpy")  # (no signature: the arguments' own types are checked against the sizes)
    with pytest.raises(TypeError, match=r"^Kernel\('axpy'\) argument 2: the compiled kernel takes 4 bytes there, got "
                                        r"float64 \(8 bytes\)$"):
        stream.launch(untyped, GRID, BLOCK, y, y, np.float64(2.0), np.int32(N))
    stream.launch(untyped, GRID, BLOCK, y, y, np.float32(2.0), np.int32(N))  # y = 2y + y
    stream.synchronize()
    np.testing.assert_array_equal(y.to_numpy(), Y0 * 3)


@pytest.mark.gpu
def test_a_cubin_kernel_loaded_by_the_driver_is_a_kernel_of_another_library(cuda_device):
    cubin, _ = nvrtc_cubin(cuda_device, SOURCE)
    handle = driver_function(cuda_device, cubin, "axpy")
    axpy = gg.Kernel.from_function(handle, AXPY, device=cuda_device)
    stream = cuda_device.stream()
    x, y = cuda_device.asarray(X0), cuda_device.asarray(Y0)
    stream.launch(axpy, GRID, BLOCK, y, x, 0.0, N)  # (loaded before the capture: y unchanged)
    with stream.capture() as capture:  # (captured: the node is read back as this Kernel's)
        stream.launch(axpy, GRID, BLOCK, y, x, 0.5, N)
    (node,) = capture.graph.nodes
    assert node.params.kernel is axpy
    with capture.graph.instantiate() as exe:
        exe.launch(stream)
        exe.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(y.to_numpy(), X0 + Y0)


@pytest.mark.gpu
def test_another_library_s_function_is_refused_on_another_device(cuda_device):
    handle = driver_function(cuda_device, PTX.encode(), "axpy")
    elsewhere = gg.Kernel.from_function(handle, AXPY, device=gg.Device("cpu"), cpu=axpy_cpu)
    y = cuda_device.asarray(Y0)
    with pytest.raises(ValueError, match=r"^Kernel\('CUfunction 0x[0-9a-f]+'\) is another library's function loaded "
                                         r"on cpu:0, and a CUfunction runs only in the context it was loaded in: use "
                                         r"it on cpu:0, or give Kernel\.from_function the library's function for "
                                         r"cuda:\d+$"):
        cuda_device.stream().launch(elsewhere, GRID, BLOCK, y, y, 2.0, N)
    cpu = gg.Device("cpu")  # (its Python implementation runs on the CPU backend)
    z = cpu.asarray(Y0)
    stream = cpu.stream()
    stream.launch(elsewhere, GRID, BLOCK, z, z, 2.0, N)
    stream.synchronize()
    np.testing.assert_array_equal(z.to_numpy(), Y0 * 3)


@pytest.mark.gpu
def test_a_function_of_one_gpu_is_refused_on_another(pair):
    first, second = pair
    if first.backend != "cuda":
        pytest.skip(f"CUfunctions belong to CUDA contexts; this pair is {first.backend}'s")
    axpy = gg.Kernel.from_function(driver_function(first, PTX.encode(), "axpy"), AXPY, device=first)
    y = second.asarray(Y0)
    with pytest.raises(ValueError, match=rf"is another library's function loaded on {first}, and a CUfunction runs "
                                         rf"only in the context it was loaded in"):
        second.stream().launch(axpy, GRID, BLOCK, y, y, 2.0, N)


@pytest.mark.gpu
def test_a_cupy_raw_kernel(cuda_device):
    cp = pytest.importorskip("cupy")
    with cp.cuda.Device(cuda_device.index):
        raw = cp.RawKernel(SOURCE, "axpy")
        axpy = gg.Kernel.from_function(raw, AXPY, device=cuda_device)  # (its function for CuPy's current device)
        function = gg.Kernel.from_function(raw.kernel, AXPY, device=cuda_device)  # (cupy.cuda.Function)
    assert repr(axpy) == "Kernel('axpy')" and axpy.handle == raw.kernel.ptr == function.handle
    stream = cuda_device.stream()
    x, y = cuda_device.asarray(X0), cuda_device.asarray(Y0)
    stream.launch(axpy, GRID, BLOCK, y, x, 2.0, N)
    g = gg.Graph(cuda_device)
    g.add_kernel(function, GRID, BLOCK, y, x, -1.0, N)
    with g.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(y.to_numpy(), X0 + Y0)
