"""gpugraph's core modules: front-end modules on hot paths, each written once in Cython's pure-Python mode (a
``.py`` file, with a ``.pxd`` of C declarations beside it where it has a C class), which setup.py compiles to
extension modules where Cython and a C compiler are present at build time, and which run as plain Python
elsewhere, with the same results and errors. This module is their one list, and says which of them run compiled
in this process and why the others run plain.

A core module runs compiled when its extension module is present, the last build made it from the module's
source as it is now (setup.py writes what it built, with a digest of each source, into ``_core_build.json``
beside the extensions), and ``GPUGRAPH_COMPILED=0`` is not in the environment. Otherwise its ``.py`` file is
imported, even where an extension is present (Python would take an extension before a ``.py`` of the same name:
the finder ``use_chosen`` installs sends those imports to the ``.py``). ``gpugraph/__init__.py`` calls
``use_chosen`` before it imports any core module. setup.py loads this file alone (it imports no other part of
gpugraph) for ``MODULES`` and ``source_digest``.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import importlib.util
import json
import os
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

MODULES = ("_topology",)  # the core modules, in gpugraph (setup.py compiles each)
RECORD = "_core_build.json"  # what the last build compiled (setup.py writes it beside the extensions)
TURNED_OFF = os.environ.get("GPUGRAPH_COMPILED", "1") == "0"  # (the CUDA backend's compiled path reads it too)
REBUILD = "pip install -e . or python setup.py build_ext --inplace"
PACKAGE = "gpugraph"

_why_plain: dict[str, str | None] = {}  # each core module's reason to run plain (None: compiled), once chosen


def source_digest(folder: str, name: str) -> str | None:
    """The SHA-256 of core module ``name``'s source in ``folder``: its ``.py``, then its ``.pxd`` if it has one.
    None where the ``.py`` is missing (an install that left the sources out: its extension is all there is)."""
    digest = hashlib.sha256()
    for suffix in (".py", ".pxd"):
        path = os.path.join(folder, name + suffix)
        if os.path.isfile(path):
            with open(path, "rb") as file:
                digest.update(file.read())
        elif suffix == ".py":
            return None
    return digest.hexdigest()


def extension_file(folder: str, name: str) -> str | None:
    """The extension module of core module ``name`` in ``folder`` that this interpreter can import, if any."""
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = os.path.join(folder, name + suffix)
        if os.path.isfile(path):
            return path
    return None


def _read_record(folder: str) -> tuple[dict[str, dict[str, str]] | None, str | None]:
    """The build record in ``folder`` (None if there is none), or why it cannot be read."""
    path = os.path.join(folder, RECORD)
    if not os.path.isfile(path):
        return None, None
    try:
        with open(path, encoding="utf-8") as file:
            record = json.load(file)
    except (OSError, ValueError) as error:  # (reported: each core module then runs plain and info says why)
        return None, f"its build record {path} cannot be read ({error})"
    return record, None


def choose(folder: str, names: Sequence[str], turned_off: bool) -> dict[str, str | None]:
    """For each core module of ``names`` in ``folder``: why it runs plain, or None where it runs compiled."""
    record, unreadable = _read_record(folder)
    chosen: dict[str, str | None] = {}
    for name in names:
        built = (record or {}).get(name)
        extension = extension_file(folder, name)
        if turned_off:
            why: str | None = "turned off: GPUGRAPH_COMPILED=0"
        elif unreadable is not None:
            why = unreadable
        elif extension is None and built is not None and "digest" in built:
            why = f"its extension is missing, though the build record says it was compiled: rebuild ({REBUILD})"
        elif extension is None:
            why = "not built" + (f": {built['why']}" if built is not None and "why" in built else
                                 " (setup.py compiles it where Cython and a C compiler are present at build time)")
        elif built is None:
            why = f"its extension has no entry in the build record {RECORD} (setup.py writes one as it compiles)"
        elif "digest" not in built:
            why = f"its extension is an earlier build's: the last build left it out ({built.get('why')})"
        else:
            digest = source_digest(folder, name)
            why = None if digest in (None, built["digest"]) else (
                f"{name}.py or its .pxd changed since it was compiled: rebuild ({REBUILD})")
        chosen[name] = why
    return chosen


class _PlainFinder:
    """Finds the listed core modules' ``.py`` files ahead of their extension modules."""

    def __init__(self, sources: dict[str, str]) -> None:
        self.sources = sources  # full module name -> its .py

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        source = self.sources.get(fullname)
        return None if source is None else importlib.util.spec_from_file_location(fullname, source)


def use_chosen() -> None:
    """Choose how each core module loads (once), and send the imports of those that run plain past their
    extension modules where they have one. Called before any core module is imported."""
    if _why_plain:
        return
    folder = os.path.dirname(os.path.abspath(__file__))
    _why_plain.update(choose(folder, MODULES, TURNED_OFF))
    sources = {f"{PACKAGE}.{name}": os.path.join(folder, f"{name}.py") for name, why in _why_plain.items()
               if why is not None and extension_file(folder, name) is not None}
    if sources:
        sys.meta_path.insert(0, _PlainFinder(sources))


def modes() -> dict[str, str]:
    """Each core module's mode in this process, as ``python -m gpugraph info`` prints it: "compiled", or "plain"
    and why. Read from the module imported (an extension module, or its ``.py``)."""
    use_chosen()
    found = {}
    for name in MODULES:
        module = importlib.import_module(f"{PACKAGE}.{name}")
        if not str(module.__file__).endswith(".py"):
            found[name] = "compiled"
        else:
            found[name] = f"plain ({_why_plain[name] or 'its .py was imported before gpugraph chose'})"
    return found
