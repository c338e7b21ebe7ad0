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

A core module that calls the CUDA driver through ``cuda.bindings.cydriver`` (``BINDINGS``) runs compiled only with a
cuda-bindings of the major version it was built against (the build record says which): cydriver's C signatures
are those of its version. Its choice is made when it is first imported, after the CUDA backend imported cuda-bindings;
where its extension still does not load (a cydriver of the same major version declaring other C signatures), its
``.py`` runs in its place (``FallbackLoader``) and ``info`` says why.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

# The core modules, by their names in gpugraph (setup.py compiles each); those of them that cimport cuda-bindings.
MODULES = ("_argpack", "_topology", "_stream_state", "backends._hot", "_exec_state", "backends.cuda._leaves")
BINDINGS = ("backends.cuda._leaves",)
# The core modules each one cimports (its C classes): compiled, it needs them compiled too.
CIMPORTS = {"_exec_state": ("_argpack", "_stream_state", "backends._hot"),
            "_stream_state": ("_argpack", "backends._hot"),
            "backends.cuda._leaves": ("backends._hot",)}
RECORD = "_core_build.json"  # what the last build compiled (setup.py writes it beside the extensions)
TURNED_OFF = os.environ.get("GPUGRAPH_COMPILED", "1") == "0"  # (the CUDA backend's compiled path reads it too)
REBUILD = "pip install -e . or python setup.py build_ext --inplace"
PACKAGE = "gpugraph"

_why_plain: dict[str, str | None] = {}  # each core module's reason to run plain (None: compiled), once chosen


def _path(folder: str, name: str, suffix: str) -> str:
    """The file of core module ``name`` (a dotted name in gpugraph) in the package folder ``folder``."""
    return os.path.join(folder, *name.split(".")) + suffix


def bindings_major() -> str | None:
    """The major version of the cuda-bindings installed (imported), or None if there is none."""
    try:
        import cuda.bindings
    except ImportError:
        return None
    return str(cuda.bindings.__version__).split(".")[0]


def source_digest(folder: str, name: str) -> str | None:
    """The SHA-256 of core module ``name``'s source in ``folder``: its ``.py``, then its ``.pxd`` if it has one.
    None where the ``.py`` is missing (an install that left the sources out: its extension is all there is)."""
    digest = hashlib.sha256()
    for suffix in (".py", ".pxd"):
        path = _path(folder, name, suffix)
        if os.path.isfile(path):
            with open(path, "rb") as file:
                digest.update(file.read())
        elif suffix == ".py":
            return None
    return digest.hexdigest()


def extension_file(folder: str, name: str) -> str | None:
    """The extension module of core module ``name`` in ``folder`` that this interpreter can import, if any."""
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = _path(folder, name, suffix)
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
        elif "cuda-bindings" in built and built["cuda-bindings"] != (have := bindings_major()):
            why = (f"it was built against cuda-bindings {built['cuda-bindings']}.x, and "
                   f"{'none is installed' if have is None else f'{have}.x is installed'}: rebuild ({REBUILD})")
        else:
            digest = source_digest(folder, name)
            why = None if digest in (None, built["digest"]) else (
                f"{name.replace('.', '/')}.py or its .pxd changed since it was compiled: rebuild ({REBUILD})")
        chosen[name] = why
    return chosen


FOLDER = os.path.dirname(os.path.abspath(__file__))


def chosen(name: str) -> str | None:
    """Why core module ``name`` runs plain in this process, or None where it runs compiled (chosen once)."""
    if name not in _why_plain:
        why = choose(FOLDER, [name], TURNED_OFF)[name]
        _why_plain[name] = why  # (so far: a module cimporting it back, in a cycle, asks no further)
        if why is None:
            plain = [other for other in CIMPORTS.get(name, ()) if chosen(other) is not None]
            if plain:
                why = f"it cimports {', '.join(plain)}, which run{'s' if len(plain) == 1 else ''} plain"
        _why_plain[name] = why
    return _why_plain[name]


class FallbackLoader(importlib.abc.Loader):
    """Loads core module ``name`` from its extension module (``compiled``, a loader) or, where the extension does not
    load here, from its ``.py`` (``source``), saying why: an extension that cimports cuda-bindings refuses, as it
    loads, a cydriver that declares another C signature than the one it was built against."""

    def __init__(self, name: str, compiled: importlib.abc.Loader, source: str) -> None:
        self.name, self.compiled, self.source = name, compiled, source

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        try:
            return self.compiled.create_module(spec)
        except (ImportError, TypeError) as error:
            self._refused(error)
            return None  # (the default module, which exec_module replaces)

    def exec_module(self, module: ModuleType) -> None:
        if _why_plain.get(self.name) is None:
            try:
                self.compiled.exec_module(module)
                return
            except (ImportError, TypeError) as error:
                self._refused(error)
        # The .py in its place: the import system takes the module that sys.modules holds once this returns.
        full = f"{PACKAGE}.{self.name}"
        spec = importlib.util.spec_from_file_location(full, self.source)
        assert spec is not None and spec.loader is not None  # (a file path: always a spec and a loader)
        plain = importlib.util.module_from_spec(spec)
        sys.modules[full] = plain
        spec.loader.exec_module(plain)

    def _refused(self, error: BaseException) -> None:
        _why_plain[self.name] = (f"its extension does not load here ({type(error).__name__}: {error}): rebuild "
                                 f"({REBUILD})")


class _Chooser:
    """Chooses how each core module loads as it is first imported, and finds the ``.py`` of one that runs plain
    ahead of its extension module (or, for one that cimports cuda-bindings, in its place if it does not load)."""

    def __init__(self) -> None:
        self.names = {f"{PACKAGE}.{name}": name for name in MODULES}  # full module name -> its name in gpugraph

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        name = self.names.get(fullname)
        extension = None if name is None else extension_file(FOLDER, name)
        if name is None or extension is None:
            return None  # (not a core module, or one with no extension: Python's own finders)
        source = _path(FOLDER, name, ".py")
        if chosen(name) is not None:
            return importlib.util.spec_from_file_location(fullname, source)
        if name not in BINDINGS:
            return None  # (compiled: Python's own finders find the extension first)
        loader = FallbackLoader(name, importlib.machinery.ExtensionFileLoader(fullname, extension), source)
        return importlib.util.spec_from_file_location(fullname, extension, loader=loader)


def use_chosen() -> None:
    """Have each core module load as chosen when first imported: send the imports of those that run plain past
    their extension modules where they have one. Called before any core module is imported."""
    if not any(isinstance(finder, _Chooser) for finder in sys.meta_path):
        sys.meta_path.insert(0, _Chooser())


def modes() -> dict[str, str]:
    """Each core module's mode in this process, as ``python -m gpugraph info`` prints it: "compiled", or "plain"
    and why. Read from the module imported (an extension module, or its ``.py``)."""
    use_chosen()
    found = {}
    for name in MODULES:
        if name in BINDINGS and bindings_major() is None:
            found[name] = "unused (cuda-bindings is not installed: no CUDA backend)"
            continue
        module = importlib.import_module(f"{PACKAGE}.{name}")
        if not str(module.__file__).endswith(".py"):
            found[name] = "compiled"
        else:
            found[name] = f"plain ({_why_plain.get(name) or 'its .py was imported before gpugraph chose'})"
    return found
