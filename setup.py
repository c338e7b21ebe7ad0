"""Build of gpugraph's optional compiled CUDA path (``gpugraph.backends.cuda._fast``, Cython on
``cuda.bindings.cydriver``). Everything else is in pyproject.toml.

The extension is optional: where Cython, a C++ compiler or a ``cuda.h`` at least as new as the cuda-bindings
it builds against is missing, or the build fails, gpugraph installs without it and runs on the pure-Python
path (``python -m gpugraph info`` says which). ``GPUGRAPH_BUILD_EXTENSION`` chooses: ``auto`` (the default),
``off`` (never build it) or ``required`` (a failed build fails the install).
"""

from __future__ import annotations

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


class OptionalBuildExt(build_ext):
    """build_ext that leaves the compiled path out, saying why, unless GPUGRAPH_BUILD_EXTENSION=required."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as error:  # noqa: BLE001 - reported, and the pure-Python install goes on
            self._skip(f"the build failed ({error!r})")

    def build_extension(self, ext: Any) -> None:
        try:
            from Cython.Build import cythonize
        except ImportError as error:
            return self._skip(f"Cython is missing ({error})")
        include = _cuda_include()
        if include is None:
            return self._skip("no folder with cuda.h (as new as the cuda-bindings present) and cudaProfiler.h "
                              "was found")
        ext.include_dirs.append(include)
        # cythonize gives distutils Extensions: keep setuptools' own, with the generated C++ source.
        ext.sources = cythonize([ext], language_level=3, quiet=True)[0].sources
        try:
            super().build_extension(ext)
        except Exception as error:  # noqa: BLE001 - reported, and the pure-Python install goes on
            self._skip(f"compiling failed ({error!r})")
        return None

    def _skip(self, why: str) -> None:
        if MODE == "required":
            raise RuntimeError(f"gpugraph build: the compiled CUDA path is required but {why}")
        _say(f"the compiled CUDA path is not built: {why}; gpugraph runs on the pure-Python path")


extensions = [] if MODE == "off" else [
    Extension("gpugraph.backends.cuda._fast", ["src/gpugraph/backends/cuda/_fast.pyx"], language="c++",
              optional=MODE != "required"),
]
setup(ext_modules=extensions, cmdclass={"build_ext": OptionalBuildExt})
