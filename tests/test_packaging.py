"""Packaging: the source distribution carries what its tests need (MANIFEST.in), the LICENSE pyproject names,
install commands that work as written (gpugraph is not on the package index), and one list of what the
CUDA backend needs, which the backend checks when it loads."""

from __future__ import annotations

import ast
import fnmatch
import json
import pathlib
import re
import subprocess
import sys
import types

import pytest

import gpugraph as gg
from gpugraph.backends import cuda as cuda_backend

ROOT = pathlib.Path(__file__).resolve().parents[1]


def pyproject(key: str) -> object:
    """The value of ``key = ...`` (a string or an array of strings, on one line) in pyproject.toml."""
    found = re.findall(rf"^{re.escape(key)} = (.+)$", (ROOT / "pyproject.toml").read_text(), flags=re.M)
    assert len(found) == 1, f"pyproject.toml: expected one {key!r}, found {found}"
    return ast.literal_eval(found[0])  # TOML strings and arrays of them read as Python literals


def manifest_files() -> set[str]:
    """The files MANIFEST.in adds to the source distribution (beyond the package and pyproject's files)."""
    files: set[str] = set()
    for line in (ROOT / "MANIFEST.in").read_text().splitlines():
        command, *patterns = line.split() or ["#"]
        if command.startswith("#"):
            continue
        if command == "include":
            files |= {p.relative_to(ROOT).as_posix() for pattern in patterns for p in ROOT.glob(pattern)}
        elif command == "graft":
            files |= {p.relative_to(ROOT).as_posix() for folder in patterns for p in (ROOT / folder).rglob("*")
                      if p.is_file()}
        elif command == "global-exclude":
            files = {f for f in files if not any(fnmatch.fnmatch(part, pattern)
                                                 for part in f.split("/") for pattern in patterns)}
        else:
            pytest.fail(f"MANIFEST.in: this test does not know {command!r}; teach it")
    return files


def test_sdist_carries_tests_docs_and_license():
    needed = {"LICENSE", "tools/dev/structure_counts.py", "tools/dev/bench_tables.py",  # (tests run them)
              *(p.relative_to(ROOT).as_posix() for p in [*ROOT.glob("tests/*.py"), *ROOT.glob("docs/*.md"),
                                                         *ROOT.glob("docs/results/*/*"), *ROOT.glob("tools/*/*.md")])}
    assert {"tests/conftest.py", "tests/kernels.py", "docs/guide.md"} <= needed
    missing = needed - manifest_files()
    assert not missing, f"MANIFEST.in leaves out {sorted(missing)}"


def test_license_is_the_one_pyproject_names():
    assert pyproject("license") == "MIT"
    assert pyproject("license-files") == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License\n\nCopyright (c) 2026 the gpugraph authors\n")
    assert "THE SOFTWARE IS PROVIDED \"AS IS\", WITHOUT WARRANTY OF ANY KIND" in text


def test_cuda_extra_is_what_the_backend_names():
    extras = pyproject("cuda")
    assert extras == list(cuda_backend.REQUIREMENTS)
    assert any(r.startswith(f"cuda-bindings>={cuda_backend.SUPPORTED_MAJOR},<") for r in extras)
    # cuda-bindings alone has no NVRTC, nor the runtime and CCCL headers (cuda_fp16.h, nv/target) that kernels include
    assert any(r.startswith("cuda-toolkit[")
               and {"nvrtc", "cudart", "cccl"} <= set(r[r.index("[") + 1:r.index("]")].split(",")) for r in extras)


def test_nvrtc_is_given_cudarts_and_cccls_headers(monkeypatch):
    """NVRTC's include folders: cudart's, then CCCL's (cooperative_groups.h includes its nv/target), those found; a
    pathfinder that does not know CCCL yet gives cudart's alone, and any other failure of the lookup is raised."""
    compile_ = pytest.importorskip("gpugraph.backends.cuda._compile")  # (it needs cuda-bindings)
    pathfinder = pytest.importorskip("cuda.pathfinder")

    def finder(known):
        def find(library):
            if library not in known:
                raise RuntimeError(f"UNKNOWN libname={library!r}")
            if known[library] is RuntimeError:
                raise RuntimeError(f"the {library} wheel is damaged")
            return known[library]
        return find

    try:
        for known, folders in (({"cudart": "/c", "cccl": "/l"}, ("/c", "/l")), ({"cudart": "/c"}, ("/c",)),
                               ({"cudart": "/c", "cccl": None}, ("/c",))):
            monkeypatch.setattr(pathfinder, "find_nvidia_header_directory", finder(known))
            compile_.toolkit_includes.cache_clear()
            assert compile_.toolkit_includes() == folders
        monkeypatch.setattr(pathfinder, "find_nvidia_header_directory", finder({"cudart": "/c", "cccl": RuntimeError}))
        compile_.toolkit_includes.cache_clear()
        with pytest.raises(RuntimeError, match="the cccl wheel is damaged"):
            compile_.toolkit_includes()
    finally:
        compile_.toolkit_includes.cache_clear()
    # The hint for a missing nv/target names the extra the cuda extra brings
    assert "cuda-toolkit[cccl]==13.*" in compile_.CCCL_MISSING and "cccl" in cuda_backend.REQUIREMENTS[1]


def test_install_commands_do_not_fetch_gpugraph_from_the_index():
    """`pip install 'gpugraph[cuda]'` fails: gpugraph is not on the package index."""
    texts = [ROOT / "README.md", *ROOT.glob("docs/*.md"), *pathlib.Path(gg.__file__).parent.rglob("*.py")]
    wrong = [f"{path.name}: {command}" for path in texts
             for command in re.findall(r"pip install [^`\n;&]*", path.read_text(encoding="utf-8"))
             if re.search(r"(?<![\w./-])gpugraph\b", command)]
    assert not wrong, wrong
    assert 'pip install ".[cuda]"' in cuda_backend.INSTALL


def fake_cuda_bindings(monkeypatch: pytest.MonkeyPatch, version: str, nvrtc_error: Exception | None = None) -> None:
    """Make ``import cuda.bindings`` find a stand-in of ``version`` with one GPU (the real one, where
    present, comes back after the test)."""
    def nvrtc_version() -> tuple:
        if nvrtc_error is not None:
            raise nvrtc_error
        return (0, 13, 3)
    bindings = types.ModuleType("cuda.bindings")
    bindings.__version__ = version
    bindings.driver = types.SimpleNamespace(cuInit=lambda flags: (0,), cuDeviceGetCount=lambda: (0, 1))
    bindings.nvrtc = types.SimpleNamespace(nvrtcVersion=nvrtc_version)
    package = types.ModuleType("cuda")
    package.bindings = bindings
    for name, module in {"cuda": package, "cuda.bindings": bindings, "cuda.bindings.driver": bindings.driver,
                         "cuda.bindings.nvrtc": bindings.nvrtc}.items():
        monkeypatch.setitem(sys.modules, name, module)


def test_cuda_bindings_of_another_major_version_is_refused(monkeypatch):
    fake_cuda_bindings(monkeypatch, "12.9.4")
    with pytest.raises(gg.BackendUnavailableError,
                       match=r"^cuda: gpugraph needs cuda-bindings 13\.x, found 12\.9\.4; install it from a "
                             r"gpugraph checkout with `pip install \"\.\[cuda\]\"`"):
        cuda_backend.create_backend()


def test_missing_nvrtc_is_named(monkeypatch):
    fake_cuda_bindings(monkeypatch, "13.3.1", RuntimeError("Failure finding libnvrtc.so.13"))
    with pytest.raises(gg.BackendUnavailableError,
                       match=r"^cuda: NVRTC, which compiles the kernels, cannot be loaded \(Failure finding "
                             r"libnvrtc\.so\.13\); install it .*\"cuda-toolkit\[nvrtc,cudart,cccl\]==13\.\*\"`$"):
        cuda_backend.create_backend()


def test_package_ships_its_annotations_and_configures_its_checkers():
    """PEP 561: py.typed marks the package as typed and goes into the wheel; pyproject configures the
    checkers that CI runs (mypy on src, ruff check), and the `lint` extra installs them."""
    assert (pathlib.Path(gg.__file__).parent / "py.typed").is_file()
    text = (ROOT / "pyproject.toml").read_text()
    package_data = re.search(r"^\[tool\.setuptools\.package-data\]\n(?:#.*\n)*gpugraph = (.+)$", text, flags=re.M)
    assert package_data and "py.typed" in ast.literal_eval(package_data[1])
    for section in ("[tool.mypy]", "[[tool.mypy.overrides]]", "[tool.ruff]", "[tool.ruff.lint]"):
        assert re.search(rf"^{re.escape(section)}$", text, flags=re.M), f"pyproject.toml lacks {section}"
    assert pyproject("files") == ["src"]
    assert pyproject("python_version") == "3.10" and pyproject("target-version") == "py310"
    lint = pyproject("lint")
    assert isinstance(lint, list) and {r.split(">")[0] for r in lint} == {"mypy", "ruff"}


STRUCTURE_COUNTS = ROOT / "tools" / "dev" / "structure_counts.py"

# The edges between modules that a plain import does not show, and the sizes, at their present numbers (the
# tool's docstring defines each). A change that adds one fails here; a change that removes one lowers its number
# here, so it stays removed.
HIDDEN_EDGES = {
    "typing_circles": 1, "typing_circles_modules": 13, "hook_circles": 1, "hook_circles_modules": 14,
    "hooks": 3, "private_reads": 253, "cross_module_private_reads": 7,
    "any_parameters": 728, "any_typed_parameters": 0, "any_typed_parameters_backends": 118,
    "lane_references": 13, "in_step_notes": 1, "pyx_lines": 414,
    "modules_over_600": 0, "functions_over_60": 0,
}


def structure_counts(*options: str) -> dict[str, int]:
    result = subprocess.run([sys.executable, str(STRUCTURE_COUNTS), "--json", *options],
                            capture_output=True, text=True, check=True)
    counts: dict[str, int] = json.loads(result.stdout)
    return counts


@pytest.fixture(scope="module")
def counts() -> dict[str, int]:
    return structure_counts()


def test_the_package_imports_in_layers_with_no_circle(counts):
    """Each module can be read knowing only those below it: no import circle among gpugraph's
    modules, counting imports inside functions and leaving out those for type annotations only."""
    assert (counts["import_circles"], counts["import_circles_modules"]) == (0, 0), \
        "an import circle: tools/dev/structure_counts.py --list names its modules"


def test_hidden_edges_and_sizes_only_go_down(counts):
    """Each figure of HIDDEN_EDGES is exactly its number: above it a change added a hidden edge (or a long module
    or function); below it the number here must be lowered, so the edge removed stays removed."""
    grown = {name: f"{counts[name]} > {limit}" for name, limit in HIDDEN_EDGES.items() if counts[name] > limit}
    assert not grown, f"more than before: {grown}; tools/dev/structure_counts.py --list names each"
    lowered = {name: counts[name] for name, limit in HIDDEN_EDGES.items() if counts[name] < limit}
    assert not lowered, f"fewer than HIDDEN_EDGES holds: lower its numbers to {lowered}"


def test_structure_counts_finds_each_kind_of_hidden_edge(tmp_path):
    """The tool's rules on a made-up package (--root): each figure the ratchet holds counts what it names."""
    package = tmp_path / "src" / "gpugraph"
    (package / "backends").mkdir(parents=True)
    files = {
        "__init__.py": "from . import _a, _b, _c\n",
        "backends/__init__.py": "",
        "backends/_protocol.py": "from typing import Any\n\n\nclass Backend:\n"
                                 "    def kernel_load(self, kernel: Any, name: Any) -> None: ...\n",
        "_a.py": "from __future__ import annotations\n"
                 "from typing import TYPE_CHECKING, Any\n"
                 "if TYPE_CHECKING:\n    from ._b import Graph\n"
                 "made: Any = None\n\n\n"
                 "class Capture:\n    __slots__ = ('_done', '_fast')\n\n"
                 "    def __init__(self, graph: Graph) -> None:\n"
                 "        self._done = False\n        self._fast = None\n\n"
                 "    def ended(self, other: Capture) -> bool:\n        return other._done\n",
        "_b.py": "from typing import Any\n\nfrom . import _a\nfrom ._a import Capture\n\n\n"
                 "class Graph:\n    def __init__(self, device: Any) -> None:\n"
                 "        self._capture = Capture(self)  # keep in step with _lanes.pyx\n\n"
                 "    def done(self, capture: Any, count: Any) -> bool:\n"
                 "        return capture._done and _a._helper()\n\n\n"
                 "_a.made = Graph\n",
        "_c.py": "from . import _a\n\n_a.other, fast = 1, None\nfast.set_types(_a.Capture)\n\n\n"
                 "def long():\n" + "    x = 1\n" * 60,
        "_d.py": "from . import _e\n",
        "_e.py": "def late():\n    from . import _d\n    return _d\n",
        "_big.py": "x = 1\n" * 601,
        "_lanes.pyx": "a\nb\nc\n",
    }
    for name, text in files.items():
        (package / name).write_text(text)
    found = structure_counts("--root", str(tmp_path))
    assert {name: found[name] for name in [*HIDDEN_EDGES, "import_circles", "late_imports", "protocol_methods"]} == {
        "import_circles": 1, "late_imports": 1,  # _d and _e, one of them importing inside a function
        "typing_circles": 2, "typing_circles_modules": 4,  # and _a with _b
        "hook_circles": 2, "hook_circles_modules": 5,  # _a reaches _b's Graph and _c's value
        "hooks": 3, "private_reads": 3, "cross_module_private_reads": 2,  # _b reads capture._done, _a._helper
        "any_parameters": 5, "any_typed_parameters": 2, "any_typed_parameters_backends": 1,
        "lane_references": 1, "in_step_notes": 1, "pyx_lines": 3,
        "modules_over_600": 1, "functions_over_60": 1, "protocol_methods": 1,
    }
