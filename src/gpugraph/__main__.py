"""Command line: ``python -m gpugraph demo | info | bench``, and ``--version``.

A mistake on the command line or in ``$GPUGRAPH_BACKEND`` is one line on stderr and exit status 2."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
import traceback

from . import __version__, _core, available_backends
from ._cli import Parser, UsageError, open_device, reason, report
from ._errors import BackendUnavailableError
from .backends import BACKEND_ORDER, get_backend

PROG = "python -m gpugraph"


def _demo(args: argparse.Namespace) -> int:
    from .examples import EXAMPLES
    device = open_device(args.backend)
    print(f"gpugraph {__version__} demo on {device} ({device.name})")
    rows = []
    for name in EXAMPLES:
        module = importlib.import_module(f"gpugraph.examples.{name}")
        try:
            result = module.run(device)
            rows.append((name, "yes" if result.validated else "NO", f"{result.seconds * 1e3:9.1f}", result.detail))
        except Exception as exc:  # noqa: BLE001 - one failing example is reported, the rest still run
            traceback.print_exc()
            rows.append((name, "NO", "        -", f"{type(exc).__name__}: {exc}"))
    print(f"\n{'example':<22} {'validated':<9} {'time (ms)':>9}  detail")
    for name, ok, ms, detail in rows:
        print(f"{name:<22} {ok:<9} {ms}  {detail}")
    return 0 if all(row[1] == "yes" for row in rows) else 1


def _info(args: argparse.Namespace) -> int:
    print(f"gpugraph {__version__}, Python {sys.version.split()[0]}")
    for name in BACKEND_ORDER:
        try:
            backend = get_backend(name)
        except BackendUnavailableError as exc:
            print(f"  {name:<5} unavailable: {reason(exc, name)}")
            continue
        for index in range(backend.device_count()):
            print(f"  {name}:{index:<3} {backend.device_name(index)}")
    print(f"default device: {open_device(None)} (available: {', '.join(available_backends())})")
    print(f"core modules: {', '.join(f'{name} {mode}' for name, mode in _core.modes().items())}")
    print(f"CUDA compiled path: {_compiled_path()}")
    return 0


def _compiled_path() -> str:
    """What ``info`` says of the CUDA backend's compiled path: its status, or plainly that it is unused where the
    CUDA backend itself is not installed (setup.py builds the extension wherever it can, GPU or not)."""
    from .backends.cuda import _compiled
    if _compiled.fast is None and _compiled.status.startswith("built but not importable") and not _has_bindings():
        return ("built, but unused: the CUDA backend's package, cuda-bindings, is not installed (see the cuda line "
                "above); the CPU backend does not need it")
    return _compiled.status


def _has_bindings() -> bool:
    try:
        return importlib.util.find_spec("cuda.bindings") is not None
    except ImportError:  # no `cuda` package at all
        return False


def _bench(args: argparse.Namespace) -> int:
    from .bench import main as bench_main
    return bench_main(args.bench_args)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m gpugraph``; returns the exit status (argparse exits for --help, --version
    and a malformed command line)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["bench"]:  # every option after "bench" belongs to the benchmark's own parser
        from .bench import main as bench_main
        return bench_main(argv[1:])
    parser = Parser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"gpugraph {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="run gpugraph.examples on the best backend and validate them")
    demo.add_argument("--backend", default=None,
                      help="device such as 'cpu' or 'cuda:0' (default: $GPUGRAPH_BACKEND, else the best present)")
    demo.set_defaults(run=_demo)
    info = commands.add_parser("info", help="list backends and devices")
    info.set_defaults(run=_info)
    bench = commands.add_parser("bench", help="run the benchmarks (python -m gpugraph bench --help)")
    bench.add_argument("bench_args", nargs=argparse.REMAINDER)
    bench.set_defaults(run=_bench)
    args = parser.parse_args(argv)
    try:
        available_backends()  # none usable at all (a wrong $GPUGRAPH_CPU_DEVICES): said before anything runs
    except BackendUnavailableError as exc:
        return report(f"{PROG} {args.command}", str(exc))
    try:
        return args.run(args)
    except UsageError as exc:
        return report(f"{PROG} {args.command}", str(exc))


if __name__ == "__main__":
    sys.exit(main())
