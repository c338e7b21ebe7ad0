"""Builds driver_loops (the C timing loops of measure.py) in place:
``CUDA_HOME=<folder with include/cuda.h as new as cuda-bindings> python3 setup.py build_ext --inplace``."""
import os

from Cython.Build import cythonize
from setuptools import Extension, setup

include = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "include")
setup(name="driver_loops", ext_modules=cythonize(
    [Extension("driver_loops", ["driver_loops.pyx"], language="c++", include_dirs=[include])],
    language_level=3, quiet=True))
