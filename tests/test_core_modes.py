"""The core modules (gpugraph._core.MODULES): one source, run compiled where the build compiled it and plain
elsewhere or with ``GPUGRAPH_COMPILED=0``, with the same results and errors; ``python -m gpugraph info`` says
which mode each runs in, and why a plain one is plain."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

import gpugraph as gg
from gpugraph import _core, _cython

PACKAGE = pathlib.Path(gg.__file__).resolve().parent
ROOT = PACKAGE.parents[1]
EXTENSIONS = tuple(importlib.machinery.EXTENSION_SUFFIXES)


def run_python(code: str, compiled: str, block_cython: bool = False) -> str:
    """``code`` in a fresh interpreter with ``GPUGRAPH_COMPILED=compiled`` (and, with ``block_cython``, as if
    Cython were not installed); its stdout."""
    prelude = "import sys\nsys.modules['cython'] = None\n" if block_cython else ""
    environ = dict(os.environ, GPUGRAPH_COMPILED=compiled,
                   PYTHONPATH=os.pathsep.join(filter(None, [str(PACKAGE.parent), os.environ.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, "-c", prelude + code], capture_output=True, text=True, env=environ,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def info_modes(compiled: str) -> dict[str, str]:
    """The core modules' modes as ``python -m gpugraph info`` prints them."""
    out = run_python("from gpugraph.__main__ import main\nmain(['info'])", compiled)
    (line,) = [line for line in out.splitlines() if line.startswith("core modules: ")]
    parts = re.split(rf"(?:^|, )({'|'.join(map(re.escape, _core.MODULES))}) ", line.removeprefix("core modules: "))
    assert parts[0] == "", line
    return dict(zip(parts[1::2], parts[2::2]))


FILES = ("import importlib, json, gpugraph\n"
         "print(json.dumps({n: importlib.import_module(f'gpugraph.{n}').__file__ for n in gpugraph._core.MODULES}))")


def source_of(name: str) -> pathlib.Path:
    """Core module ``name``'s ``.py``."""
    return PACKAGE.joinpath(*name.split(".")).with_suffix(".py")


def test_info_lists_each_core_module_and_its_mode():
    """info's line names every core module, in the list's order, each in the mode this process runs it in."""
    modes = info_modes(os.environ.get("GPUGRAPH_COMPILED", "1"))
    assert list(modes) == list(_core.MODULES) and _core.MODULES
    assert modes == _core.modes()


def test_turned_off_each_core_module_runs_its_py():
    files = json.loads(run_python(FILES, "0"))
    assert sorted(files) == sorted(_core.MODULES)
    for name, file in files.items():
        assert pathlib.Path(file) == source_of(name)
    assert info_modes("0") == dict.fromkeys(_core.MODULES, "plain (turned off: GPUGRAPH_COMPILED=0)")


def test_each_core_module_the_build_compiled_runs_compiled():
    """Where setup.py built this checkout (its record, _core_build.json, says what it compiled), each core module
    is its extension module unless turned off: a build that left one out fails here, unless Cython was missing or
    older than setup.py's floor."""
    record_file = PACKAGE / _core.RECORD
    if not record_file.is_file():
        pytest.skip(f"this checkout was not built by setup.py (no {_core.RECORD}): every core module runs plain")
    record = json.loads(record_file.read_text())
    assert sorted(record) == sorted(_core.MODULES), f"{_core.RECORD} is an older build's: rebuild ({_core.REBUILD})"
    without_cython = {name: built["why"] for name, built in record.items()
                      if re.match(r"Cython (is missing|\S+ is older than)", built.get("why", ""))}
    if without_cython:
        pytest.skip(f"built without a Cython that compiles the core: {without_cython}")
    assert all("digest" in built for built in record.values()), f"the build left core modules out: {record}"
    files = json.loads(run_python(FILES, "1"))
    for name, file in files.items():
        assert file.endswith(EXTENSIONS) and pathlib.Path(file).parent == source_of(name).parent, \
            f"{name} runs plain ({_core.choose(str(PACKAGE), [name], False)[name]}), though the build compiled it"
    assert info_modes("1") == dict.fromkeys(_core.MODULES, "compiled")


# What a Topology does, printed: the same in both modes (errors by class and message).
TOPOLOGY_WORKLOAD = """
from gpugraph._topology import Topology
t = Topology()
for handle, deps in (("h0", ()), ("h1", (0,)), ("h2", (0, 1)), ("h3", [2])):
    print(t.add(handle, None, deps, alloc="a" if handle == "h2" else None))
print(len(t), t.shape(), t.deps, t.deps_of(2), t.dependents(0), t.reaches(0, [3]), t.memory, t.allocs)
t.add_edge(1, 3)
t.remove_edge(2, 3)
print(t.shape(), t.has_shape(((), 0, (0, 1), 1)), t.position)
t.remove(1)
print(t.handles, t.shape(), [t.number(i) for i in range(len(t))], t.renamed, t.numbered, t.allocs)
for call in (lambda: t.deps_of(7), lambda: t.remove_edge(2, 1), lambda: t.remove(9), lambda: t.add_edge(0, 5),
             lambda: setattr(t, "unknown", 1)):
    try:
        call()
    except Exception as error:
        print(type(error).__name__, error if type(error) is not AttributeError else "")
print(len(t), t.shape())
"""


def test_a_core_module_gives_the_same_results_and_errors_in_both_modes():
    plain = run_python(TOPOLOGY_WORKLOAD, "0")
    assert plain.splitlines()[:4] == ["0", "1", "2", "3"]
    assert "IndexError list index out of range" in plain and "ValueError list.remove(x): x not in list" in plain
    assert run_python(TOPOLOGY_WORKLOAD, "1") == plain


# What the CUDA driver leaves answer in a process that never initialized the driver (CUDA_ERROR_NOT_INITIALIZED
# where a driver is present, cuda-bindings' loader error where none is), and the arguments they refuse.
LEAVES_WORKLOAD = """
from gpugraph.backends.cuda import _leaves
print("plain" if _leaves.__file__.endswith(".py") else "compiled")
for name, args in (("graph_launch", (0, 0)), ("launch_kernel", (0, 1, 1, 1, 1, 1, 1, 0, 0, 0)),
                   ("begin_capture", (0, 0)), ("capture_graph", (0,)), ("end_capture", (0,)),
                   ("graph_nodes", (0,)), ("exec_update", (0, 0)), ("graph_destroy", (0,)),
                   ("graph_launch", (-1, 0)), ("graph_launch", ("x", 0)), ("graph_launch", (0,))):
    try:
        print(name, getattr(_leaves, name)(*args))
    except Exception as error:
        print(name, type(error).__name__)
"""


def test_the_driver_leaves_give_the_same_results_and_errors_in_both_modes():
    pytest.importorskip("cuda.bindings", reason="cuda-bindings is not installed here")
    plain = run_python(LEAVES_WORKLOAD, "0").splitlines()
    assert plain[0] == "plain" and plain[-3:] == ["graph_launch OverflowError", "graph_launch TypeError",
                                                  "graph_launch TypeError"]
    compiled = run_python(LEAVES_WORKLOAD, "1").splitlines()
    name = "backends.cuda._leaves"
    built = _core.choose(str(PACKAGE), [name], False)[name] is None  # (this checkout's build compiled it, as it is)
    assert compiled[0] == ("compiled" if built else "plain") and compiled[1:] == plain[1:]


class _Refusing(importlib.abc.Loader):
    """An extension's loader that refuses to load it, as one does beside a cydriver of other C signatures."""

    def create_module(self, spec: object) -> None:
        return None

    def exec_module(self, module: object) -> None:
        raise TypeError("C function cuda.bindings.cydriver.cuGraphLaunch has wrong signature")


class _Loading(_Refusing):
    def exec_module(self, module: object) -> None:
        vars(module)["x"] = "compiled"


@pytest.mark.parametrize("refusing", [True, False], ids=["refused", "loaded"])
def test_an_extension_that_does_not_load_leaves_its_core_module_plain_saying_why(tmp_path, monkeypatch, refusing):
    source = tmp_path / "_m.py"
    source.write_text("x = 'plain'\n")
    monkeypatch.setattr(_core, "_why_plain", {})
    loader = _core.FallbackLoader("_m", _Refusing() if refusing else _Loading(), str(source))
    spec = importlib.util.spec_from_file_location("gpugraph._m", str(tmp_path / f"_m{EXTENSIONS[0]}"), loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "gpugraph._m", module)
    loader.exec_module(module)
    loaded = sys.modules["gpugraph._m"]
    if refusing:
        assert loaded is not module and loaded.x == "plain" and loaded.__file__ == str(source)
        assert _core.chosen("_m") == ("its extension does not load here (TypeError: C function cuda.bindings.cydriver."
                                      f"cuGraphLaunch has wrong signature): rebuild ({_core.REBUILD})")
    else:
        assert loaded is module and loaded.x == "compiled" and _core._why_plain == {}


def test_plain_mode_without_cython_uses_gpugraphs_stand_in():
    out = run_python("import importlib, gpugraph, gpugraph._cython\n"
                     "print([importlib.import_module(f'gpugraph.{n}').cython is gpugraph._cython\n"
                     "       for n in gpugraph._core.MODULES])\n"
                     + TOPOLOGY_WORKLOAD, "0", block_cython=True)
    assert out.splitlines()[0] == str([True] * len(_core.MODULES))
    assert out.splitlines()[1:] == run_python(TOPOLOGY_WORKLOAD, "0").splitlines()


def test_the_stand_in_names_what_cythons_own_module_names():
    shadow = pytest.importorskip("cython", reason="Cython is not installed here")
    names = {"compiled", "cclass", "cfunc", "ccall", "inline", "final", "locals", "declare", "cast", "bint",
             "Py_ssize_t", "double"}
    assert names <= set(vars(_cython)), "the stand-in lacks a name this test lists"
    assert all(hasattr(shadow, name) for name in names)
    assert _cython.compiled is shadow.compiled is False

    class Kept:
        pass

    for decorator in (_cython.cclass, _cython.cfunc, _cython.ccall, _cython.inline, _cython.final,
                      _cython.locals(x=_cython.Py_ssize_t)):
        assert decorator(Kept) is Kept
    assert _cython.declare(_cython.double, 2.5) == 2.5 and _cython.cast(_cython.bint, 0) == 0


def test_no_other_extension_module_shadows_a_source():
    """Python imports an extension module before a .py of the same name, and only the core modules' imports are
    sent past theirs: an extension left by an older build of a module that is no longer compiled would hide it."""
    found = {path.relative_to(PACKAGE).as_posix().partition(".")[0] for suffix in EXTENSIONS
             for path in PACKAGE.rglob(f"*{suffix}")}
    allowed = {*(name.replace(".", "/") for name in _core.MODULES), "backends/cuda/_fast",
               "bench/_thinnest"}  # (the .pyx extensions: no .py beside)
    assert found <= allowed, f"remove {sorted(found - allowed)}"


def test_each_core_modules_pxd_is_shipped_beside_it():
    pxds = {path.relative_to(PACKAGE).with_suffix("").as_posix().replace("/", ".") for path in PACKAGE.rglob("*.pxd")}
    assert pxds <= set(_core.MODULES), f"a .pxd without a core module: {pxds - set(_core.MODULES)}"
    assert {"_topology", "backends.cuda._leaves"} <= pxds
    shipped = (ROOT / "pyproject.toml").read_text()
    assert all(f'"{folder}*.pxd"' in shipped for folder in ("", "backends/", "backends/cuda/"))


def fake_core(folder: pathlib.Path, record: object = None, extension: bool = True) -> str:
    """A package folder with core module _m (a .py and a .pxd), its extension if ``extension`` (an empty file:
    choose looks, never imports) and the build record ``record`` (JSON; a str is written as it is)."""
    (folder / "_m.py").write_text("x = 1\n")
    (folder / "_m.pxd").write_text("cdef int y\n")
    if extension:
        (folder / f"_m{EXTENSIONS[0]}").write_bytes(b"")
    if record is not None:
        (folder / _core.RECORD).write_text(record if isinstance(record, str) else json.dumps(record))
    return str(folder)


def test_choose_says_why_a_core_module_runs_plain(tmp_path):
    digest = _core.source_digest(fake_core(tmp_path), "_m")
    assert digest is not None and len(digest) == 64

    def why(record: object = None, extension: bool = True, turned_off: bool = False) -> str | None:
        for old in tmp_path.iterdir():
            old.unlink()
        return _core.choose(fake_core(tmp_path, record, extension), ["_m"], turned_off)["_m"]

    assert why({"_m": {"digest": digest}}) is None  # built from the source as it is: compiled
    assert why({"_m": {"digest": digest}}, turned_off=True) == "turned off: GPUGRAPH_COMPILED=0"
    assert why(extension=False) == ("not built (setup.py compiles it where Cython and a C compiler are present at "
                                    "build time)")
    assert why({"_m": {"why": "Cython is missing (no)"}}, extension=False) == "not built: Cython is missing (no)"
    assert why({"_m": {"digest": digest}}, extension=False) == ("its extension is missing, though the build record "
                                                                 f"says it was compiled: rebuild ({_core.REBUILD})")
    assert why({"_m": {"why": "compiling failed (E)"}}) == ("its extension is an earlier build's: the last build "
                                                             "left it out (compiling failed (E))")
    assert why({}) == ("its extension has no entry in the build record _core_build.json (setup.py writes one as "
                       "it compiles)")
    assert why({"_m": {"digest": "0" * 64}}) == ("_m.py or its .pxd changed since it was compiled: rebuild "
                                                  f"({_core.REBUILD})")
    assert re.fullmatch(r"its build record .*_core_build\.json cannot be read \(.+\)", why("{not json") or "")
    # A module that cimports cuda-bindings runs compiled only with the major version it was built against.
    have = _core.bindings_major()
    other = "1" if have == "0" else "0"
    assert why({"_m": {"digest": digest, "cuda-bindings": other}}) == (
        f"it was built against cuda-bindings {other}.x, and "
        f"{'none is installed' if have is None else f'{have}.x is installed'}: rebuild ({_core.REBUILD})")
    assert have is None or why({"_m": {"digest": digest, "cuda-bindings": have}}) is None
    (tmp_path / "_m.pxd").write_text("cdef int z\n")  # the .pxd is part of the source
    assert _core.source_digest(str(tmp_path), "_m") != digest
    (tmp_path / "_m.py").unlink()  # an install without sources: its extension is all there is
    assert _core.source_digest(str(tmp_path), "_m") is None


def test_a_cython_too_old_to_compile_the_core_leaves_it_plain_and_says_why(tmp_path):
    """setup.py compiles no core module with a Cython older than its floor (3.3.0 miscompiles one: a crash), and
    says so in its output and its build record; the install goes on."""
    if not (ROOT / "setup.py").is_file():
        pytest.skip("an install without its sources: no setup.py to run")
    fake = tmp_path / "fake" / "Cython"
    (fake / "Build").mkdir(parents=True)
    (fake / "__init__.py").write_text("__version__ = '3.3.0'\n")
    (fake / "Build" / "__init__.py").write_text("def cythonize(*args, **kwargs):\n    raise RuntimeError('not here')\n")
    environ = dict(os.environ, PYTHONPATH=str(tmp_path / "fake"), GPUGRAPH_BUILD_EXTENSION="auto")
    done = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--build-lib", str(tmp_path / "lib"),
                           "--build-temp", str(tmp_path / "temp")], cwd=ROOT, capture_output=True, text=True,
                          env=environ, timeout=300)
    assert done.returncode == 0, done.stderr
    why = "Cython 3.3.0 is older than 3.3.1, the oldest that compiles it right (pip install 'Cython>=3.3.1')"
    assert f"the core module gpugraph._topology is not compiled: {why}; it runs as plain Python" in done.stderr
    record = json.loads((tmp_path / "lib" / "gpugraph" / _core.RECORD).read_text())
    assert record == {name: {"why": why} for name in _core.MODULES}


def test_a_core_module_runs_plain_where_a_core_module_it_cimports_does(monkeypatch):
    monkeypatch.setattr(_core, "_why_plain", {"_stream_state": "not built (no compiler)", "backends._hot": None})
    monkeypatch.setattr(_core, "choose", lambda folder, names, turned_off: dict.fromkeys(names))  # (each built)
    assert _core.chosen("_exec_state") == "it cimports _stream_state, which runs plain"
    assert _core.chosen("backends.cuda._leaves") is None
    monkeypatch.setattr(_core, "_why_plain", {"_stream_state": "a", "backends._hot": "b"})
    assert _core.chosen("_exec_state") == "it cimports _stream_state, backends._hot, which run plain"
    assert set(_core.CIMPORTS) <= set(_core.MODULES)
    assert all(set(needed) <= set(_core.MODULES) for needed in _core.CIMPORTS.values())


def test_the_cimports_core_lists_are_those_of_the_sources():
    found = {}
    for name in _core.MODULES:
        text = "".join((PACKAGE / f"{name.replace('.', '/')}{suffix}").read_text()
                       for suffix in (".py", ".pxd") if (PACKAGE / f"{name.replace('.', '/')}{suffix}").exists())
        needed = set(re.findall(r"(?:from|cimports)\.?\s*gpugraph\.([\w.]+)\s+c?import", text))
        if needed:
            found[name] = needed
    assert found == {name: set(needed) for name, needed in _core.CIMPORTS.items()}
