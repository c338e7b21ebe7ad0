"""``python -m gpugraph``: a mistake on the command line or in ``$GPUGRAPH_BACKEND`` is one line on stderr and
exit status 2 (no traceback); ``bench`` checks ``--json PATH`` first and reports progress on stderr; ``--version``;
``info`` names each unavailable backend once."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest

import gpugraph as gg
from gpugraph import bench
from gpugraph.__main__ import main
from gpugraph.backends.cpu import configured_devices

CPU_DEVICES = configured_devices()  # cpu:0 .. cpu:CPU_DEVICES-1 exist

SRC = str(pathlib.Path(gg.__file__).resolve().parents[1])


def run_main(argv: list[str], capsys: pytest.CaptureFixture) -> tuple[int, str, str]:
    """``main(argv)`` in this process: its exit status (argparse's too), stdout and stderr."""
    try:
        status = main(argv)
    except SystemExit as exc:
        status = exc.code
    out, err = capsys.readouterr()
    return status, out, err


def run_module(args: list[str], env: dict[str, str] | None = None,
               prelude: str = "") -> subprocess.CompletedProcess:
    """``python -m gpugraph ARGS`` in a fresh interpreter (``prelude`` runs first, in the same process)."""
    code = f"{prelude}\nimport runpy, sys\nsys.argv[0] = 'gpugraph'\nrunpy.run_module('gpugraph', run_name='__main__')"
    environ = {k: v for k, v in os.environ.items() if k != "GPUGRAPH_BACKEND"}
    environ.update(env or {}, PYTHONPATH=os.pathsep.join(filter(None, [SRC, os.environ.get("PYTHONPATH")])))
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=environ,
                          timeout=120)


def one_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got:\n{err}"
    assert "Traceback" not in err
    return lines[0]


UNAVAILABLE = next(name for name in gg.backends.BACKEND_ORDER if name not in gg.available_backends())


@pytest.mark.parametrize("argv, message", [
    ([], r"^python -m gpugraph: error: the following arguments are required: command "
         r"\(see python -m gpugraph --help\)$"),
    (["nothing"], r"^python -m gpugraph: error: argument command: invalid choice: 'nothing'"),
    (["demo", "--bogus"], r"^python -m gpugraph: error: unrecognized arguments: --bogus"),
    (["demo", "--backend", "gpu"], r"^python -m gpugraph demo: error: --backend gpu: Device: expected 'cuda', "
                                   r"'hip' or 'cpu', optionally with ':index', got 'gpu'$"),
    (["demo", "--backend", f"cpu:{CPU_DEVICES}"], rf"^python -m gpugraph demo: error: --backend cpu:{CPU_DEVICES}: "
                                                  rf"this machine has {CPU_DEVICES} cpu device\(s\)$"),
    (["demo", "--backend", f"{UNAVAILABLE}:0"], rf"^python -m gpugraph demo: error: --backend {UNAVAILABLE}:0: "
                                                rf"(?!{UNAVAILABLE}:)\S"),
    (["bench", "--backend", "gpu"], r"^python -m gpugraph bench: error: --backend gpu: Device: expected "),
    (["bench", "--repeats", "0"], r"^python -m gpugraph bench: error: argument --repeats: expected a positive "
                                  r"int, got '0' \(see python -m gpugraph bench --help\)$"),
    (["bench", "--warmup", "-1"], r"^python -m gpugraph bench: error: argument --warmup: expected a non-negative "
                                  r"int, got '-1'"),
    (["bench", "--nodes", "x"], r"^python -m gpugraph bench: error: argument --nodes: expected a positive int, "
                                r"got 'x'"),
    (["bench", "--workload", "nope"], r"^python -m gpugraph bench: error: argument --workload: invalid choice: "
                                      r"'nope'"),
])
def test_mistake_is_one_line_and_status_2(capsys, argv, message):
    status, out, err = run_main(argv, capsys)
    assert status == 2
    assert out == ""
    assert re.search(message, one_line(err)), err


@pytest.mark.parametrize("command", [["demo"], ["bench", "--workload", "rk4"], ["info"]])
@pytest.mark.parametrize("value, reason", [
    ("nonsense", r"Device: expected 'cuda', 'hip' or 'cpu', optionally with ':index', got 'nonsense'$"),
    (f"cpu:{CPU_DEVICES + 3}", rf"this machine has {CPU_DEVICES} cpu device\(s\)$"),
])
def test_environment_mistake_is_one_line_and_status_2(capsys, monkeypatch, command, value, reason):
    monkeypatch.setenv("GPUGRAPH_BACKEND", value)
    status, out, err = run_main(command, capsys)
    assert status == 2
    assert re.search(rf"^python -m gpugraph {command[0]}: error: GPUGRAPH_BACKEND={value}: {reason}",
                     one_line(err)), err
    if command[0] != "info":  # info lists the backends first; the others run nothing
        assert out == ""


def test_cuda_named_where_cuda_is_missing():
    """Where cuda-bindings cannot be imported (hidden in the child process, so on any machine), `info` and `demo`
    asked for the CUDA backend name the missing package and how to install it, and exit with status 2."""
    hide = "import sys; sys.modules['cuda'] = None"
    done = run_module(["info"], env={"GPUGRAPH_BACKEND": "cuda"}, prelude=hide)
    assert done.returncode == 2, done.stderr
    assert re.search(r"^python -m gpugraph info: error: GPUGRAPH_BACKEND=cuda: the package cuda-bindings is not "
                     r"importable .*pip install \"\.\[cuda\]\"", one_line(done.stderr))
    assert "\n  cuda  unavailable: the package cuda-bindings is not importable" in done.stdout
    done = run_module(["demo", "--backend", "cuda"], prelude=hide)
    assert done.returncode == 2 and done.stdout == ""
    assert one_line(done.stderr).startswith("python -m gpugraph demo: error: --backend cuda: the package "
                                            "cuda-bindings is not importable")


def test_module_mistake_and_version():
    done = run_module(["demo", "--backend", f"cpu:{CPU_DEVICES}"])
    assert (done.returncode, done.stdout) == (2, "")
    assert one_line(done.stderr) == (f"python -m gpugraph demo: error: --backend cpu:{CPU_DEVICES}: this machine has "
                                     f"{CPU_DEVICES} cpu device(s)")
    done = run_module(["--version"])
    assert (done.returncode, done.stdout, done.stderr) == (0, f"gpugraph {gg.__version__}\n", "")


def test_info_names_each_unavailable_backend_once(capsys):
    status, out, err = run_main(["info"], capsys)
    assert (status, err) == (0, "")
    unavailable = [line for line in out.splitlines() if " unavailable: " in line]
    assert len(unavailable) == len(gg.backends.BACKEND_ORDER) - len(gg.available_backends())
    for line in unavailable:
        name, _, reason = line.strip().partition(" ")
        assert not reason.strip().removeprefix("unavailable: ").startswith(f"{name}:"), line
    assert "  hip   unavailable: the HIP backend (hip-python) is planned" in out
    assert f"default device: {gg.Device()} " in out


@pytest.mark.parametrize("where", ["missing/out.json", "."])
def test_bench_checks_json_path_before_running(tmp_path, capsys, monkeypatch, where):
    ran = []
    monkeypatch.setattr(bench, "run", lambda *args, **kwargs: ran.append(args) or [])
    path = tmp_path / where
    status, out, err = run_main(["bench", "--backend", "cpu", "--workload", "rk4", "--json", str(path)], capsys)
    assert (status, out, ran) == (2, "", [])
    expected = (f"the folder {str(tmp_path / 'missing')!r} does not exist" if where != "." else
                f"{str(path)!r} is a folder; expected a file name")
    assert one_line(err) == (f"python -m gpugraph bench: error: argument --json: {expected} "
                             f"(see python -m gpugraph bench --help)")


def test_bench_reports_progress_on_stderr(tmp_path, capsys):
    out_json = tmp_path / "bench.json"
    status, out, err = run_main(["bench", "--backend", "cpu", "--workload", "rk4", "--workload", "chain",
                                 "--repeats", "2", "--warmup", "0", "--nodes", "8", "--json", str(out_json)], capsys)
    assert status == 0, err
    progress = err.splitlines()
    assert len(progress) == 4, err
    assert progress[0] == f"bench: [1/2] rk4: {bench.WORKLOADS['rk4'].description} ..."
    assert re.fullmatch(r"bench: \[1/2\] rk4: [1-9]\d* figure\(s\) in \d+\.\d s", progress[1])
    assert progress[2].startswith("bench: [2/2] chain: ")
    assert re.fullmatch(r"bench: \[2/2\] chain: [1-9]\d* figure\(s\) in \d+\.\d s", progress[3])
    assert "[1/2]" not in out and "| rk4 " in out  # the table on stdout stays clean
    assert out_json.exists()


@pytest.mark.parametrize("switch", ["1", "0"])
def test_info_says_whether_the_compiled_cuda_path_is_in_use(switch):
    done = run_module(["info"], env={"GPUGRAPH_COMPILED": switch})
    assert done.returncode == 0, done.stderr
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("CUDA compiled path: ")]
    if switch == "0":
        assert line == "CUDA compiled path: turned off (GPUGRAPH_COMPILED=0): the pure-Python path"
    else:
        # (built but unused: the extension built where cuda-bindings is not installed, as the README's install makes)
        assert re.fullmatch(r"CUDA compiled path: (built \(gpugraph\.backends\.cuda\._fast\)|(not built|built but "
                            r"not importable) \(.+\): the pure-Python path|built, but unused: the CUDA backend's "
                            r"package, cuda-bindings, is not installed \(.+\); the CPU backend does not need it)",
                            line), line
