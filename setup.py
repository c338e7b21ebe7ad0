"""Build of gpugraph's compiled parts, both optional: its core modules (``gpugraph._core.MODULES``: plain
``.py`` files in Cython's pure-Python mode, compiled to C extension modules) and the compiled CUDA path
(``gpugraph.backends.cuda._fast``, Cython on ``cuda.bindings.cydriver``), with the bench's in-process floor
(``gpugraph.bench._thinnest``, built the same way). Everything else is in pyproject.toml.

A core module needs Cython and a C compiler; the CUDA path also a C++ compiler and a ``cuda.h`` at least as new
as the cuda-bindings it builds against. Where one is missing, or a build fails, gpugraph installs without that
extension and runs the module as plain Python, or the CUDA backend on its pure-Python path (``python -m gpugraph
info`` says which). ``GPUGRAPH_BUILD_EXTENSION`` chooses for both: ``auto`` (the default), ``off`` (build
neither) or ``required`` (a failed build fails the install). The build writes what it compiled into
``gpugraph/_core_build.json`` beside the extensions (``gpugraph._core`` reads it).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
from typing import Any

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

MODE = os.environ.get("GPUGRAPH_BUILD_EXTENSION", "auto")
if MODE not in ("auto", "off", "required"):
    raise SystemExit(f"GPUGRAPH_BUILD_EXTENSION: expected auto, off or required, got {MODE!r}")


def _say(message: str) -> None:
    print(f"gpugraph build: {message}", file=sys.stderr)


PACKAGE_DIR = os.path.join("src", "gpugraph")


def _core() -> Any:
    """gpugraph/_core.py, loaded alone (it imports no other part of gpugraph): the core modules' list and digest."""
    spec = importlib.util.spec_from_file_location("gpugraph_core_for_build", os.path.join(PACKAGE_DIR, "_core.py"))
    assert spec is not None and spec.loader is not None  # (a file path: always a spec and a loader)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CORE = _core()
# Cython's directives for the core modules: Python 3 semantics; Python annotations are left to mypy and do not
# become C type checks (the .pxd files declare the C types), so the plain and compiled modes accept the same
# arguments.
CORE_DIRECTIVES = {"language_level": 3, "annotation_typing": False}
# The oldest Cython that compiles the core right: 3.3.0 drops the read of a typed object's attribute that a loop
# iterates over (``for i, child in source.children.items()`` in _topology iterated a freed temporary: a crash).
CORE_CYTHON = (3, 3, 1)


def _version(text: str) -> tuple[int, ...]:
    """A version's leading numbers: "3.3.0" -> (3, 3, 0), "3.4.0b1" -> (3, 4, 0)."""
    return tuple(int(part) for part in re.findall(r"\d+", re.split(r"[a-z]", text)[0])[:3])


def _cuda_version(header: str) -> tuple[int, int] | None:
    """The CUDA_VERSION a cuda.h declares, as (major, minor)."""
    with open(header, encoding="utf-8", errors="replace") as file:
        found = re.search(r"#define\s+CUDA_VERSION\s+(\d+)", file.read())
    return None if found is None else (int(found.group(1)) // 1000, int(found.group(1)) % 1000 // 10)


def _bindings_version() -> tuple[int, int] | None:
    try:
        from importlib.metadata import version
        major, minor = version("cuda-bindings").split(".")[:2]
        return int(major), int(minor)
    except Exception:  # noqa: BLE001 - not installed or an odd version: the caller says why it skips
        return None


def _cuda_include() -> str | None:
    """A folder holding a cuda.h at least as new as the cuda-bindings present (cydriver.pxd declares what its
    own version's header has) and the cudaProfiler.h that cydriver.pxd also includes: the build environment's
    nvidia-cuda-runtime and nvidia-cuda-profiler-api first (both install into nvidia/cu13/include), then
    CUDA_HOME/CUDA_PATH and /usr/local/cuda."""
    candidates = [os.path.join(path, "nvidia", "cu13", "include") for path in sys.path]
    candidates += [os.path.join(root, "include") for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"),
                                                                "/usr/local/cuda") if root]
    needed = _bindings_version()
    for folder in candidates:
        header = os.path.join(folder, "cuda.h")
        if os.path.isfile(header):
            have = _cuda_version(header)
            if needed is not None and (have is None or have < needed):
                _say(f"{header} is CUDA {have}, older than cuda-bindings {needed}; looking further")
            elif not os.path.isfile(os.path.join(folder, "cudaProfiler.h")):
                _say(f"{folder} has cuda.h but no cudaProfiler.h; looking further")
            else:
                return folder
    return None


class CoreRequired(RuntimeError):
    """A core module not compiled under GPUGRAPH_BUILD_EXTENSION=required."""


class OptionalBuildExt(build_ext):
    """build_ext that leaves out, saying why, a core module or the compiled CUDA path it cannot build, unless
    GPUGRAPH_BUILD_EXTENSION=required; and writes the build record of the core modules."""

    def run(self) -> None:
        self.core_built: dict[str, dict[str, str]] = {}  # core module -> its digest, or why it is not built
        inplace = self.inplace  # (setuptools clears it while it builds, and copies the extensions in place after)
        try:
            super().run()
        except CoreRequired:
            raise
        except Exception as error:  # noqa: BLE001 - reported, and the pure-Python install goes on
            for name in CORE.MODULES:
                self.core_built.setdefault(name, {"why": f"the build failed ({error!r})"})
            self._skip(f"the build failed ({error!r})", "the CUDA extensions")
        folder = self.get_finalized_command("build_py").get_package_dir("gpugraph") if inplace else \
            os.path.join(self.build_lib, "gpugraph")
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, CORE.RECORD), "w", encoding="utf-8") as file:
            file.write(json.dumps(self.core_built, indent=1, sort_keys=True) + "\n")

    def build_extension(self, ext: Any) -> None:
        name = ext.name.removeprefix("gpugraph.")
        if name in CORE.MODULES:
            return self._build_core(ext, name)
        try:
            from Cython.Build import cythonize
        except ImportError as error:
            return self._skip(f"Cython is missing ({error})", ext.name)
        include = _cuda_include()
        if include is None:
            return self._skip("no folder with cuda.h (as new as the cuda-bindings present) and cudaProfiler.h "
                              "was found", ext.name)
        ext.include_dirs.append(include)
        # cythonize gives distutils Extensions: keep setuptools' own, with the generated C++ source.
        ext.sources = cythonize([ext], language_level=3, quiet=True)[0].sources
        try:
            super().build_extension(ext)
        except Exception as error:  # noqa: BLE001 - reported, and the pure-Python install goes on
            self._skip(f"compiling failed ({error!r})", ext.name)
        return None

    def _skip(self, why: str, name: str) -> None:
        """Leave CUDA extension ``name`` out, saying why (or fail, under GPUGRAPH_BUILD_EXTENSION=required)."""
        if MODE == "required":
            raise RuntimeError(f"gpugraph build: {name} is required but {why}")
        effect = ("the bench times no in-process floor" if name.endswith("_thinnest") else
                  "gpugraph runs the CUDA backend on its pure-Python path")
        _say(f"{name} is not built: {why}; {effect}")

    def _build_core(self, ext: Any, name: str) -> None:
        """Compile core module ``name`` (its .py, with its .pxd), or say why not and leave it plain."""
        try:
            from Cython import __version__ as cython_version
            from Cython.Build import cythonize
        except ImportError as error:
            return self._skip_core(name, f"Cython is missing ({error})")
        if _version(cython_version) < CORE_CYTHON:
            floor = ".".join(map(str, CORE_CYTHON))
            return self._skip_core(name, f"Cython {cython_version} is older than {floor}, the oldest that compiles it "
                                         f"right (pip install 'Cython>={floor}')")
        built = {"digest": CORE.source_digest(PACKAGE_DIR, name)}  # (first: an edit while it compiles leaves it plain)
        if name in CORE.BINDINGS:  # (it cimports cydriver, which includes cuda.h)
            major = _bindings_version()
            include = _cuda_include()
            if major is None or include is None:
                return self._skip_core(name, "cuda-bindings is missing" if major is None else
                                       "no folder with cuda.h (as new as the cuda-bindings present) and "
                                       "cudaProfiler.h was found")
            ext.include_dirs.append(include)
            built["cuda-bindings"] = str(major[0])
        try:
            # force: Cython's dependency check can miss a changed .pxd and keep a stale C file.
            ext.sources = cythonize([ext], compiler_directives=CORE_DIRECTIVES, force=True, quiet=True,
                                    build_dir=os.path.join(self.build_temp, "cython"))[0].sources
            super().build_extension(ext)
        except Exception as error:  # noqa: BLE001 - reported, and the module runs plain
            return self._skip_core(name, f"compiling failed ({error!r})")
        self.core_built[name] = built
        return None

    def _skip_core(self, name: str, why: str) -> None:
        self.core_built[name] = {"why": why}
        if MODE == "required":
            raise CoreRequired(f"gpugraph build: the core module gpugraph.{name} must be compiled but {why}")
        _say(f"the core module gpugraph.{name} is not compiled: {why}; it runs as plain Python")


extensions = [] if MODE == "off" else [
    *(Extension(f"gpugraph.{name}", [os.path.join(PACKAGE_DIR, *name.split(".")) + ".py"],
                language="c++" if name in CORE.BINDINGS else None, optional=MODE != "required")
      for name in CORE.MODULES),
    Extension("gpugraph.backends.cuda._fast", ["src/gpugraph/backends/cuda/_fast.pyx"], language="c++",
              optional=MODE != "required"),
    Extension("gpugraph.bench._thinnest", ["src/gpugraph/bench/_thinnest.pyx"], language="c++",
              optional=MODE != "required"),
]
setup(ext_modules=extensions, cmdclass={"build_ext": OptionalBuildExt})
