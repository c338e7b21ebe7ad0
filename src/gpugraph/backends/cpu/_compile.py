"""CUDA/HIP kernel source compiled for the CPU backend with the machine's C++ compiler.

A kernel without a Python implementation (``cpu=``) runs here as the GPU runs it: its source is compiled
against ``include/gpugraph_cpu.h``, which provides the kernel language, into a shared library that
``HostModule`` loads for a CPU device (``_host_kernel`` launches its kernels, ``_load`` keeps the modules and
kernels loaded).

Libraries are cached on disk (``GPUGRAPH_CACHE_DIR``, else the user's cache folder), keyed by the generated
source, the compiler and its options, so a second process loads instead of compiling.
"""

from __future__ import annotations

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
from pathlib import Path
from typing import Any

from ..._errors import KernelCompileError
from ..._kernel import SHARED_MEM_LIMIT
from . import _elf

INCLUDE = Path(__file__).with_name("include")
_FLAGS = ("-std=c++17", "-O3", "-fPIC", "-shared", "-pthread", "-ffp-contract=off", "-fno-math-errno",
          "-fvisibility=hidden", "-fnon-call-exceptions",
          # (a kernel declared and never defined is a link error, not a library that fails to load)
          *(("-Wl,-z,defs",) if sys.platform.startswith("linux") else ()))
# NVRTC/hiprtc options that only steer GPU code generation: nothing to do on the host.
_GPU_ONLY = re.compile(r"--?(default-device|lineinfo|generate-line-info|G|device-debug|dopt.*|dw|dlto|"
                       r"extra-device-vectorization|(arch|gpu-architecture|ftz|prec-div|prec-sqrt|maxrregcount|"
                       r"relocatable-device-code|rdc|restrict|offload-arch)(=.*)?|fmad=true)$")


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


def compile_module(kernel: Any, names: list[str]) -> HostModule:
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
