"""CUDA/HIP kernel source compiled for the CPU backend with the machine's C++ compiler.

A kernel without a Python implementation (``cpu=``) runs here as the GPU runs it: its source is compiled
against ``include/gpugraph_cpu.h``, which provides the kernel language, into a shared library that this module
loads and launches with the real grid and block. Blocks run in parallel on worker threads; the threads of a
block run one after another, as fibers when the library calls a barrier (``__syncthreads``), else in a plain
loop.

Libraries are cached on disk (``GPUGRAPH_CACHE_DIR``, else the user's cache folder), keyed by the generated
source, the compiler and its options, so a second process loads instead of compiling.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import functools
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import weakref
from pathlib import Path
from typing import Any

import numpy as np

from ..._errors import BackendError, GpuGraphError, KernelCompileError
from ..._kernel import SHARED_MEM_LIMIT
from ..._memory import Array
from ..._signature import ADDRESS_DTYPE, check_compiled, is_device_function, kernel_names
from . import _elf
from ._memory import ADDRESSES, ALIGNMENT, PAGE, typed_view

INCLUDE = Path(__file__).with_name("include")
_FLAGS = ("-std=c++17", "-O3", "-fPIC", "-shared", "-pthread", "-ffp-contract=off", "-fno-math-errno",
          "-fvisibility=hidden", "-fnon-call-exceptions",
          # (a kernel declared and never defined is a link error, not a library that fails to load)
          *(("-Wl,-z,defs",) if sys.platform.startswith("linux") else ()))
# NVRTC/hiprtc options that only steer GPU code generation: nothing to do on the host.
_GPU_ONLY = re.compile(r"--?(default-device|lineinfo|generate-line-info|G|device-debug|dopt.*|dw|dlto|"
                       r"extra-device-vectorization|(arch|gpu-architecture|ftz|prec-div|prec-sqrt|maxrregcount|"
                       r"relocatable-device-code|rdc|restrict|offload-arch)(=.*)?|fmad=true)$")
# A parameter's type code (the header's gg::code, NumPy's character codes) -> its dtype.
DTYPES = {code: np.dtype(code) for code in "?bBhHiIqQfde"}
# CUDA's error for each way a kernel stops (the entry point's status: 1 + the header's TrapKind).
_TRAPS = {2: "CUDA_ERROR_ASSERT", 3: "CUDA_ERROR_LAUNCH_FAILED", 4: "CUDA_ERROR_NOT_SUPPORTED",
          5: "CUDA_ERROR_ILLEGAL_ADDRESS"}
# Launches with fewer threads in all run on the calling thread: splitting them costs more than it saves.
PARALLEL_THREADS = 1 << 15
WORKERS = os.cpu_count() or 1


@functools.lru_cache(maxsize=1)
def compiler() -> tuple[str, str] | None:
    """The C++ compiler and its version line, or None: ``$CXX`` where it is set (and only it: a CXX that does
    not run is no reason to take another), else g++, clang++ or c++ on the PATH."""
    chosen = os.environ.get("CXX")
    for words in [shlex.split(chosen)] if chosen else [["g++"], ["clang++"], ["c++"]]:
        path = shutil.which(words[0]) if words else None
        if path is not None:
            try:
                version = subprocess.run([path, *words[1:], "--version"], capture_output=True, text=True, timeout=60,
                                         check=True).stdout.splitlines()[0]
            except (OSError, subprocess.SubprocessError, IndexError):
                continue
            return shlex.join([path, *words[1:]]), version  # (a command: CXX may carry options, as in make)
    return None


def host_options(kernel: Any) -> list[str]:
    """The kernel's NVRTC/hiprtc options as the host compiler's: macros, include paths and the C++ standard
    carry over, options for GPU code generation (fast math among them) are dropped, and any other
    option is refused (its effect could not be the same here)."""
    out = []
    for option in kernel.options:
        if match := re.fullmatch(r"-([DUI])(.+)|--(define-macro|undefine-macro|include-path)=(.+)", option):
            flag = match[1] or {"define-macro": "D", "undefine-macro": "U", "include-path": "I"}[match[3]]
            out.append(f"-{flag}{match[2] or match[4]}")
        elif match := re.fullmatch(r"--?std=(c\+\+\d\d)", option):
            if match[1] not in ("c++11", "c++14"):  # (gpugraph's header needs C++17, which takes their code)
                out.append(f"-std={match[1]}")
        elif option in ("-use_fast_math", "--use_fast_math"):
            pass  # (CUDA's fast math approximates; it still honours NaN and infinity, which -ffast-math would not)
        elif option in ("-fmad=false", "--fmad=false"):
            pass  # (the host compiler contracts nothing: -ffp-contract=off)
        elif not _GPU_ONLY.match(option):
            raise KernelCompileError(kernel.name, f"the CPU backend has no equivalent of the compiler option "
                                                  f"{option!r} (it takes -D, -U, -I and -std=, and ignores options "
                                                  f"for GPU code generation, -use_fast_math among them)")
    return out


_EXTERN_SHARED = re.compile(r"\bextern\s+__shared__\s+((?:__align__\s*\(\s*\w+\s*\)\s*|alignas\s*\(\s*\w+\s*\)\s*)*)"
                            r"([A-Za-z_][\w\s:<>,*]*?)\s*\b([A-Za-z_]\w*)\s*\[\s*\]\s*;")
# The tokens that decide where a declaration is: comments and literals (skipped whole), brackets, words, the rest.
_SCOPE_TOKEN = re.compile(r"""//[^\n]*|/\*.*?\*/|R"([^(\s]*)\(.*?\)\1"|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'"""
                          r"|[{}()\[\]]|[A-Za-z_]\w*|\S", re.S)
# What may stand between a function's parameter list and its body.
_AFTER_PARAMETERS = {")", "]", "const", "noexcept", "override", "final", "mutable", "volatile"}


def _scope_at(source: str, at: int) -> str:
    """Where position ``at`` of ``source`` lies: "text" (in a comment or a literal), "function" (in a function's
    body, at any depth) or "file" (at file scope, in a namespace or an ``extern "C"`` block included)."""
    stack: list[bool] = []  # for each open brace: whether it opens a function's body
    previous = ""
    for token in _SCOPE_TOKEN.finditer(source):
        if token.start() >= at:
            break
        text = token[0]
        if token.end() > at:  # (a match begins a word: only a comment or a literal can hold it)
            return "text"
        if text[:2] in ("//", "/*"):
            continue
        if text == "{":
            stack.append(previous in _AFTER_PARAMETERS)
        elif text == "}" and stack:
            stack.pop()
        previous = text
    return "function" if any(stack) else "file"


def host_source(source: str) -> str:
    """``source`` as the host compiler takes it, line for line: each ``extern __shared__`` array (the launch's
    dynamic shared memory) becomes the worker's buffer for it: in a function, a pointer to it; at file scope,
    a macro reading it (a pointer initialized there would be read once, when the library loads). One in a
    comment or a literal stays as it is."""
    def replaced(match: re.Match) -> str:
        declared, name = " ".join(match[2].split()), match[3]
        buffer = f"({declared}*)::gg::dynamic_shared()"
        scope = _scope_at(source, match.start())
        if scope == "text":
            return match[0]
        if scope == "function":
            return f"{declared}* const {name} = {buffer};" + "\n" * match[0].count("\n")
        line = source.count("\n", 0, match.end()) + 1  # (the #line that follows keeps the user's numbering)
        return f"\n#define {name} ({buffer})\n#line {line}\n"
    return _EXTERN_SHARED.sub(replaced, source)


def _program(kernel: Any, names: list[str]) -> str:
    """The translation unit: the header, the kernel's source (its lines numbered as the user's file), and one
    entry point per kernel name: ``gg_run_<i>`` runs a range of blocks, ``gg_codes_<i>`` gives its parameters'
    type codes, ``gg_address_<i>`` its address (for its shared variables' sizes); ``gg_uses_barriers`` says
    whether the blocks run as fibers, ``gg_stop_message`` what stopped the calling thread's last launch and
    ``gg_stop_address`` the illegal address it reached."""
    return (f'#include "gpugraph_cpu.h"\n#line 1 "{_file_name(kernel)}"\n{host_source(kernel.source)}\n'
            f'#line 1 {_ENTRY_FILE}\n' + _PRELUDE + "".join(_entry(i, name) for i, name in enumerate(names)))


_ENTRY_FILE = '"gpugraph-entry-points.cpp"'
_PRELUDE = ('extern "C" __attribute__((visibility("default"))) int gg_uses_barriers() {\n'
            '    return ::gg::uses_barriers();\n}\n'
            'extern "C" __attribute__((visibility("default"))) const char* gg_stop_message() {\n'
            '    return ::gg::last_stop.c_str();\n}\n'
            'extern "C" __attribute__((visibility("default"))) uintptr_t gg_stop_address() {\n'
            '    return ::gg::last_stop_address;\n}\n')


def _entry(i: int, name: str) -> str:
    """The entry points of kernel ``i`` (of the same number of lines for every kernel: _failing_names counts on
    it)."""
    return (f'extern "C" __attribute__((visibility("default"))) int gg_run_{i}(const unsigned* dims, unsigned shared,'
            f" const char* slots, long long begin, long long end, int workers) {{\n"
            f"    return ::gg::enter<&{name}>(dims, shared, slots, begin, end, workers);\n}}\n"
            f'extern "C" __attribute__((visibility("default"))) const char* gg_codes_{i}() {{\n'
            f"    return ::gg::Signature<decltype(&{name})>::codes;\n}}\n"
            f'extern "C" __attribute__((visibility("default"))) const void* gg_address_{i}() {{\n'
            f"    return reinterpret_cast<const void*>(&{name});\n}}\n")


def _failing_names(log: str, names: list[str]) -> set[str] | None:
    """The names whose entry points ``log`` (a failed build's) reports errors in: errors in the entry points'
    lines, or the linker's undefined references from them. None where the log has an error elsewhere (the
    user's source does not compile: no subset of names would)."""
    first, size = _PRELUDE.count("\n") + 1, _entry(0, "k").count("\n")
    failing = set()
    for line in log.splitlines():
        if match := re.match(r"gpugraph-entry-points\.cpp:(\d+):(?:\d+:)? (?:fatal )?error", line):
            index = (int(match[1]) - first) // size
        elif match := re.search(r"in function `gg_(?:run|codes|address)_(\d+)'", line):
            index = int(match[1])
        elif re.search(r"\berror\b", line) and "gpugraph-entry-points.cpp" not in line and "ld returned" not in line:
            return None
        else:
            continue
        if 0 <= index < len(names):
            failing.add(names[index])
    return failing


def _file_name(kernel: Any) -> str:
    return re.sub(r"\W", "_", kernel.name.split("<")[0]) + ".cu"


def cache_folder() -> Path:
    """Where compiled kernels are kept: ``$GPUGRAPH_CACHE_DIR``, else ``$XDG_CACHE_HOME/gpugraph``, else
    ``~/.cache/gpugraph``; each in its ``cpu-kernels`` folder."""
    root = os.environ.get("GPUGRAPH_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "gpugraph")
    return Path(root) / "cpu-kernels"


@functools.lru_cache(maxsize=1)
def _header_digest() -> str:
    digest = hashlib.sha256()
    for header in sorted(INCLUDE.rglob("*.h")):
        digest.update(header.read_bytes())
    return digest.hexdigest()


@functools.lru_cache(maxsize=1)
def openmp(path: str, version: str) -> bool:
    """Whether the compiler builds OpenMP code (g++ has libgomp; clang++ may lack libomp). Asked once per
    compiler version and machine: the answer is kept in the cache folder beside the kernels, keyed as they are by
    the compiler's version line, not its path."""
    digest = hashlib.sha256(version.encode()).hexdigest()[:16]
    answers = [cache_folder() / f"openmp-{digest}.{answer}" for answer in ("yes", "no")]
    for answer in answers:
        if answer.exists():
            return answer is answers[0]
    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / "probe.cpp"
        source.write_text('#include <omp.h>\nextern "C" int probe() { return omp_get_max_threads(); }\n')
        try:
            done = subprocess.run([*shlex.split(path), "-fopenmp", "-fPIC", "-shared", str(source), "-o",
                                   str(Path(folder) / "p.so")], capture_output=True, timeout=120)
            found = done.returncode == 0
        except (OSError, subprocess.SubprocessError):
            found = False
    try:
        answers[0 if found else 1].parent.mkdir(parents=True, exist_ok=True)
        answers[0 if found else 1].touch()
    except OSError:  # (an unwritable cache: ask again in the next process)
        pass
    return found


def _build(kernel: Any, program: str, command: list[str], library: Path) -> None:
    """Compile ``program`` into ``library`` (written whole, then renamed: a reader never sees half a file)."""
    library.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=library.parent) as folder:
        source, built = Path(folder) / _file_name(kernel), Path(folder) / "kernel.so"
        source.write_text(program, encoding="utf-8")
        dependencies = Path(folder) / "kernel.d"
        try:
            done = subprocess.run([*command, "-MMD", "-MF", str(dependencies), "-x", "c++", str(source), "-o",
                                   str(built)], capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.SubprocessError) as error:
            raise KernelCompileError(kernel.name, f"the C++ compiler {command[0]} could not run: {error}") from None
        if done.returncode != 0:
            log = (done.stderr or done.stdout).replace(str(source), _file_name(kernel)).replace(folder + os.sep, "")
            errors = [line for line in log.splitlines() if re.search(r"\berror\b", line)]
            if errors and all(line.startswith("gpugraph-entry-points.cpp:") for line in errors) and any(
                    marker in log for marker in ("not declared", "undeclared identifier", "no member named",
                                                 "is not a member of")):
                # (the user's source compiled: the name names nothing in it)
                raise KernelCompileError.no_kernel(kernel.name, log.rstrip())
            if re.search(rf"undefined reference to `{re.escape(kernel.name.split('<')[0].lstrip(':'))}[(<']", log):
                raise KernelCompileError(kernel.name, f"the kernel is declared in the source but never defined (the "
                                                      f"linker finds no body for it)\n{log.rstrip()}")
            raise KernelCompileError(kernel.name, log.rstrip())
        headers = _headers(dependencies.read_text(), source)
        library.with_suffix(".headers").write_text(json.dumps([[h, *_stamp(h)] for h in headers]))
        os.replace(built, library)  # (after its headers' list: a library found has one)


def _headers(make_rule: str, source: Path) -> list[str]:
    """The headers of the user's that a build read (the compiler's -MMD rule, which leaves out the system's), less
    gpugraph's own, which the cache key covers."""
    targets = make_rule.replace("\\\n", " ").split(":", 1)[1]
    paths = [p.replace("\\ ", " ") for p in re.split(r"(?<!\\)\s+", targets.strip()) if p]
    own = INCLUDE.resolve()
    return [os.path.abspath(p) for p in paths if Path(p) != source and not Path(p).resolve().is_relative_to(own)]


def _stamp(path: str) -> tuple[int, int]:
    status = os.stat(path)
    return status.st_mtime_ns, status.st_size


def _fresh(library: Path) -> bool:
    """Whether ``library`` was built and the user's headers it read are as they were then (a header changed
    since, or gone, means compiling again)."""
    try:
        headers = json.loads(library.with_suffix(".headers").read_text())
        return library.exists() and all(tuple(_stamp(path)) == (mtime, size) for path, mtime, size in headers)
    except (OSError, ValueError):
        return False


class HostModule:
    """One compiled source: its library, loaded for one CPU device, and the kernels it holds, by name."""

    def __init__(self, kernel: Any, names: list[str], device: int = 0) -> None:
        found = compiler()
        if found is None:
            chosen = os.environ.get("CXX")
            missing = (f"CXX={chosen!r} names none that runs (`{chosen} --version` failed or it is not on the PATH)"
                       if chosen else "none was found (set CXX, or install g++ or clang++)")
            raise KernelCompileError(kernel.name, f"the CPU backend compiles kernel source with a C++ compiler, and "
                                                  f"{missing}; or give the kernel a Python implementation with "
                                                  f"Kernel(source, name, cpu=fn)")
        path, version = found
        program = _program(kernel, names)
        self.parallel = openmp(path, version)  # blocks spread over the cores inside one call, else from Python
        command = [*shlex.split(path), *_FLAGS, *(["-fopenmp"] if self.parallel else []), f"-I{INCLUDE}",
                   *host_options(kernel)]
        key = hashlib.sha256("\0".join([program, version, *command[1:], _header_digest()]).encode()).hexdigest()
        library = cache_folder() / f"{key[:32]}.so"
        if _fresh(library):
            self._load(library, device)
        else:
            try:
                _build(kernel, program, command, library)
                self._load(library, device)
            except OSError:  # (an unwritable or read-only cache: a temporary folder, removed once loaded)
                with tempfile.TemporaryDirectory(prefix="gpugraph-") as folder:
                    library = Path(folder) / library.name
                    _build(kernel, program, command, library)
                    self._load(library, device)
        self.names = names
        # Each kernel's static shared memory. One past CUDA's limit refuses the whole source, as CUDA's compiler
        # does (it compiles every kernel of a module): no kernel of it may run here either.
        self.static_shared = [self._static_shared(index) for index in range(len(names))]
        self.refusal = next((f"kernel {name!r} of this source declares {size} bytes of __shared__ variables, more "
                             f"than the {SHARED_MEM_LIMIT} bytes of static shared memory CUDA allows a kernel (its "
                             f"compiler refuses the source: \"uses too much shared data\")"
                             for name, size in zip(names, self.static_shared) if size > SHARED_MEM_LIMIT), None)
        self.fibers = bool(self.library.gg_uses_barriers())  # (the blocks of its kernels run as fibers)
        self.stop_message = self.library.gg_stop_message
        self.stop_message.restype = ctypes.c_char_p
        self.stop_address = self.library.gg_stop_address
        self.stop_address.restype = ctypes.c_size_t

    def _load(self, library: Path, device: int) -> None:
        """Load ``library`` for CPU device ``device``: device 0 the file itself, any other a copy of it, made in a
        temporary folder removed once loaded. (The dynamic loader loads a file once per process, and each device
        has its own instance of the module's variables, as each GPU loads a module of its own.)"""
        if device:
            with tempfile.TemporaryDirectory(prefix="gpugraph-") as folder:
                copy = Path(folder) / f"{library.stem}-device{device}.so"
                shutil.copyfile(library, copy)
                self._load_file(copy)
        else:
            self._load_file(library)

    def _load_file(self, library: Path) -> None:
        """Load ``library`` and read its symbol table (for the sizes of shared variables), from where the load
        placed it: ``_base`` is added to a symbol's value to give its address in this process."""
        self.library = ctypes.CDLL(str(library))
        self._symbols = _elf.symbols(library)
        anchor = next((s.value for s in self._symbols or () if s.name == "gg_uses_barriers"), None)
        loaded_at = ctypes.cast(self.library.gg_uses_barriers, ctypes.c_void_p).value
        self._base = None if anchor is None or loaded_at is None else loaded_at - anchor

    def variable(self, name: str) -> tuple[int, int] | None:
        """(address, bytes) of the library's variable of linkage name ``name`` (a ``__device__``, ``__constant__`` or
        ``__managed__`` variable of the source, an ordinary global here), or None where it has none."""
        if self._symbols is None or self._base is None:
            raise KernelCompileError(self.names[0] if self.names else "?", "the CPU backend finds a module's variables "
                                     "in its library's ELF symbol table, which this platform's libraries lack")
        found = next((s for s in self._symbols if s.name == name and s.kind == _elf.OBJECT), None)
        return None if found is None else (found.value + self._base, found.size)

    def _static_shared(self, index: int) -> int:
        """The bytes of ``__shared__`` variables of kernel ``index``: those declared in its body (its lambdas'
        included) and every one at file scope (0 where the library's symbols cannot tell, as on a platform other
        than ELF's; those of the ``__device__`` functions it calls are not counted)."""
        if self._symbols is None or self._base is None:
            return 0
        address_of = getattr(self.library, f"gg_address_{index}")
        address_of.restype = ctypes.c_void_p
        return _elf.static_shared_size(self._symbols, address_of() - self._base)


DEVICE_LAUNCHES = 256  # the launches one kernel launch may ask (gg::kDeviceLaunches of the header)


class _DeviceLaunches(ctypes.Structure):
    """The header's gg::DeviceLaunches: a launch's log of the graphs its kernel launched."""

    _fields_ = [("current", ctypes.c_uint64), ("count", ctypes.c_uint64),
                ("entries", ctypes.c_uint64 * (2 * DEVICE_LAUNCHES)), ("running", ctypes.c_void_p),
                ("running_slots", ctypes.c_uint64), ("conditions", ctypes.c_void_p),
                ("condition_count", ctypes.c_uint64)]


_LOGS = threading.local()  # each thread's _DeviceLaunches, given to the kernels of graphs it runs
# The ids of the executable graphs running now (0: a free slot), which the header's cudaGraphLaunch reads: the
# executor marks them (backends.cpu._executor).
RUNNING = np.zeros(1024, np.uint64)


class HostKernel:
    """One kernel of a HostModule, launched from Python: arguments packed into 8-byte slots, blocks spread
    over the workers."""

    def __init__(self, module: HostModule, kernel: Any) -> None:
        index = module.names.index(kernel.name)
        self.kernel = kernel
        self.module = module
        self._run = getattr(module.library, f"gg_run_{index}")
        self._run.argtypes = (ctypes.c_void_p, ctypes.c_uint, ctypes.c_char_p, ctypes.c_longlong, ctypes.c_longlong,
                              ctypes.c_int)
        self._module = module
        self._run.restype = ctypes.c_int
        codes_of = getattr(module.library, f"gg_codes_{index}")
        codes_of.restype = ctypes.c_char_p
        self.codes: str = codes_of().decode()
        if "x" in self.codes:
            at = self.codes.index("x")
            what = f"parameter {at}" + (f" ({kernel.signature[at]})" if kernel.signature else "")
            raise KernelCompileError(kernel.name, f"{what} is neither a pointer nor a number type (bool, an "
                                                  f"integer, float, double or __half): the CPU backend cannot pass "
                                                  f"it (a struct by value, say)")
        signature = kernel.signature
        refusal = check_compiled(signature, [8 if c == "P" else DTYPES[c].itemsize for c in self.codes])
        if refusal is None and signature is not None:
            for i, (param, code) in enumerate(zip(signature, self.codes)):
                if param.pointer != (code == "P") or (
                        not param.pointer and param.dtype is not None and param.dtype != DTYPES[code]):
                    refusal = (f"gpugraph refuses to load it: parameter {i} ({param}) reads from the source as "
                               f"{'a pointer' if param.pointer else param.dtype}, but the compiled kernel takes "
                               f"{'a pointer' if code == 'P' else DTYPES[code]}")
                    break
        if refusal is not None:
            raise KernelCompileError(kernel.name, refusal)
        self.static_shared = module.static_shared[index]
        # The parameters that take arrays of device addresses (T**), whose addresses a launch translates.
        self._address_params = frozenset(i for i, p in enumerate(signature or ()) if p.depth >= 2)

    def _slots(self, args: tuple) -> tuple[bytes, list[tuple[np.ndarray, np.ndarray, np.ndarray]],
                                           list[tuple[int, np.ndarray]]]:
        """The arguments as the kernel reads them, each in an 8-byte slot, an array as its address; for each
        array of device addresses that holds stream-ordered or graph allocations, (the array, the translated
        copy the kernel gets, the copy as sent), so that the kernel's writes to it can be carried back; and
        (position, array) of each array passed, to name the one an illegal address lies past."""
        if len(args) != len(self.codes):
            raise TypeError(f"{self.kernel!r} takes {len(self.codes)} arguments, got {len(args)}")
        out = bytearray(8 * len(args))
        translated = []
        arrays = []
        for i, (arg, code) in enumerate(zip(args, self.codes)):
            if code == "P":
                if type(arg) is Array:
                    arg = typed_view(arg)
                if not isinstance(arg, np.ndarray):
                    raise TypeError(f"{self.kernel!r} argument {i}: expects a device Array, got {type(arg).__name__}")
                if i in self._address_params and arg.dtype == ADDRESS_DTYPE:
                    what = f"{self.kernel!r} argument {i} ({self.kernel.signature[i]})"
                    copy = ADDRESSES.translate(arg.reshape(-1), what)
                    if copy is not None:
                        translated.append((arg.reshape(-1), copy, copy.copy()))
                        arg = copy
                arrays.append((i, arg))
                out[8 * i:8 * i + 8] = arg.ctypes.data.to_bytes(8, "little")
            else:
                want = DTYPES[code]
                value = arg if isinstance(arg, np.generic) else None
                if value is None or value.dtype != want:
                    raise TypeError(f"{self.kernel!r} argument {i}: the compiled kernel takes a {want} scalar, "
                                    f"got {arg!r} ({type(arg).__name__})")
                data = value.tobytes()
                out[8 * i:8 * i + len(data)] = data
        return bytes(out), translated, arrays

    def launch(self, grid: tuple[int, int, int], block: tuple[int, int, int], shared_mem: int, args: tuple,
               current: int | None = None, conditions: np.ndarray | None = None) -> list[tuple[int, int]]:
        """Run the kernel over the whole grid; returns when every block has run. ``current``: the number of the
        executable graph the launch runs in (None: outside a graph), and ``conditions`` its conditions (uint64
        pairs of a handle and its value's address: those cudaGraphSetConditional may set); then the graphs the
        kernel launched, as (number, mode) pairs in the order asked (cudaGraphLaunch's: 1 tail, 2 fire and forget,
        3 sibling)."""
        slots, translated, arrays = self._slots(args)
        log = None
        if current is not None:  # (the thread's own log: read before this thread runs anything else)
            log = getattr(_LOGS, "log", None)
            if log is None:
                log = _LOGS.log = _DeviceLaunches()
                log.running, log.running_slots = RUNNING.ctypes.data, len(RUNNING)
            log.current, log.count = current, 0
            if conditions is None or not len(conditions):
                log.conditions, log.condition_count = None, 0
            else:
                log.conditions, log.condition_count = conditions.ctypes.data, len(conditions) // 2
            slots += ctypes.addressof(log).to_bytes(8, "little")
        else:
            slots += bytes(8)
        dims = (ctypes.c_uint * 6)(*grid, *block)
        blocks = grid[0] * grid[1] * grid[2]
        chunks = min(WORKERS, blocks) if blocks * block[0] * block[1] * block[2] >= PARALLEL_THREADS else 1
        try:
            if chunks == 1 or self._module.parallel:  # (with OpenMP, the call spreads the blocks over the cores itself)
                self._check(self._run_blocks(dims, shared_mem, slots, 0, blocks, chunks), arrays)
            else:
                bounds = [blocks * k // chunks for k in range(chunks + 1)]
                futures = [_workers().submit(self._run_blocks, dims, shared_mem, slots, bounds[k], bounds[k + 1], 1)
                           for k in range(1, chunks)]
                outcomes = [self._run_blocks(dims, shared_mem, slots, bounds[0], bounds[1], 1)]
                outcomes += [future.result() for future in futures]
                for outcome in outcomes:
                    self._check(outcome, arrays)
        finally:
            for array, copy, sent in translated:
                _carry_back(array, copy, sent)
        if log is None:
            return []
        asked = min(log.count, DEVICE_LAUNCHES)
        return [(log.entries[2 * i], log.entries[2 * i + 1]) for i in range(asked)]

    def _run_blocks(self, dims: Any, shared_mem: int, slots: bytes, begin: int, end: int,
                    workers: int) -> tuple[int, bytes, int]:
        """Run blocks [begin, end); the status, and the message and the illegal address (0: none) of a trap that
        stopped them (read on this thread, which the library keeps them for)."""
        status = self._run(dims, shared_mem, slots, begin, end, workers)
        if not status:
            return status, b"", 0
        return status, self._module.stop_message(), self._module.stop_address()

    def _check(self, outcome: tuple[int, bytes, int], arrays: list[tuple[int, np.ndarray]]) -> None:
        """Raise what stopped the kernel: CUDA's error for it (a failed assert, a trap's launch failure, an illegal
        address, which is named as past the end of one of the ``arrays`` passed where it lies in the page that
        follows it)."""
        status, message, address = outcome
        if status == 0:
            return
        code = _TRAPS.get(status)
        if code is None:  # (the entry points return 0, 2, 3, 4 or 5: any other status is a bug in gpugraph's header)
            raise RuntimeError(f"{self.kernel!r}: the compiled CPU kernel returned status {status}")
        detail = f"the kernel stopped: {message.decode(errors='replace')}"
        for i, array in arrays if address else ():
            end = array.ctypes.data + array.nbytes
            if end <= address < end + ALIGNMENT + PAGE:  # (the allocation's last bytes, then its guard page)
                param = self.kernel.signature[i] if self.kernel.signature else f"parameter {i}"
                detail += (f", {address - end} bytes past the end of argument {i} ({param}: {array.size} "
                           f"{array.dtype})")
                break
        raise BackendError("cpu", f"{self.kernel!r}", code, detail)


def _carry_back(array: np.ndarray, copy: np.ndarray, sent: np.ndarray) -> None:
    """Write into ``array`` (device addresses) the elements the kernel changed in its translated ``copy``, a host
    address of an allocation's memory as sent turned back into that allocation's device address."""
    changed = np.flatnonzero(copy != sent)
    if len(changed):
        device_address = {int(host): int(device) for host, device in zip(sent, array) if host != device}
        array[changed] = [device_address.get(int(copy[j]), int(copy[j])) for j in changed]


_pool: concurrent.futures.ThreadPoolExecutor | None = None
_lock = threading.Lock()
# By (source, options, template instance) and CPU device.
_modules: dict[tuple[tuple[str, tuple[str, ...], str], int], HostModule] = {}
_loaded: weakref.WeakKeyDictionary[Any, dict[int, HostKernel]] = weakref.WeakKeyDictionary()  # by Kernel, by device


def _workers() -> concurrent.futures.ThreadPoolExecutor:
    """The threads that run a launch's blocks beside the launching thread (ctypes releases the GIL)."""
    global _pool
    with _lock:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(max(WORKERS - 1, 1), thread_name_prefix="gpugraph-cpu-kernel")
        return _pool


def load(kernel: Any, device: int = 0) -> HostKernel:
    """``kernel`` compiled for the host and loaded for CPU device ``device``: once per Kernel and device; its source
    compiled once per process for its options and template instance, and once per machine with the disk cache;
    its library loaded once per device (device 0's first: it compiles, and the others load copies of its library)."""
    by_device = _loaded.get(kernel)
    loaded = None if by_device is None else by_device.get(device)
    if loaded is not None:
        return loaded
    if not kernel.from_source:
        raise GpuGraphError(_no_source(kernel))
    names = kernel_names(kernel.source, kernel.options)
    if is_device_function(kernel.source, kernel.name, kernel.options):  # (CUDA's module has no such kernel)
        raise KernelCompileError.no_kernel(kernel.name)
    if kernel.name not in names:  # a template's instance, or a name the reader cannot see
        names = [*names, kernel.name]
    key = (kernel.source, kernel.options, kernel.name if "<" in kernel.name else "")
    with _lock:
        module = _modules.get((key, 0))
    if module is None or kernel.name not in module.names:
        module = _module(kernel, names)  # (a failure leaves the source's module as it was)
        with _lock:
            _modules[key, 0] = module
    if device:
        with _lock:
            own = _modules.get((key, device))
        if own is None or own.names != module.names:  # (device 0's took a new name: load its library)
            own = HostModule(kernel, module.names, device)
            with _lock:
                _modules[key, device] = own
        module = own
    if module.refusal is not None:
        raise KernelCompileError(kernel.name, module.refusal)
    loaded = HostKernel(module, kernel)
    _loaded.setdefault(kernel, {})[device] = loaded
    return loaded


def _no_source(kernel: Any) -> str:
    """Why the CPU backend cannot run ``kernel``, which comes as compiled GPU code, and what to do instead."""
    if kernel.module is not None:
        what, how = f"GPU code of {kernel.module!r}", f"{kernel.module!r}.function({kernel.name!r}, ..., cpu=fn)"
    else:
        what, how = "another library's compiled GPU function", "Kernel.from_function(..., cpu=fn)"
    return (f"{kernel!r} is {what}, which the CPU backend cannot run: it runs kernels from their CUDA/HIP source "
            f"(gg.Kernel(source, name), compiled with the machine's C++ compiler) or as Python; give the kernel a "
            f"Python implementation, {how}, called as fn(launch, *args), or make it from its source")


def _module(kernel: Any, names: list[str]) -> HostModule:
    """The source's kernels ``names`` (``kernel``'s among them) compiled into one library; where some of them do
    not compile as kernels (one declared and never defined, one the reader finds that the compiler does not),
    the others, so that the source's kernels still share one library and its ``__device__`` variables."""
    try:
        return HostModule(kernel, names)
    except KernelCompileError as error:
        failing = _failing_names(error.log, names)
        if not failing or kernel.name in failing or len(names) == 1:
            if failing and kernel.name in failing and len(names) > 1:
                HostModule(kernel, [kernel.name])  # (its own error, without the other names')
            raise
        return HostModule(kernel, [name for name in names if name not in failing])
