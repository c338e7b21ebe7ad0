"""What ``python -m gpugraph`` and its ``bench`` share: a mistake on the command line or in the environment
it reads (``$GPUGRAPH_BACKEND``) is one line on stderr and exit status 2, never a traceback."""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import NoReturn

from ._device import ENV_VAR, Device
from ._errors import BackendUnavailableError

USAGE_STATUS = 2  # argparse's exit status for a usage mistake


class UsageError(Exception):
    """A command-line or environment mistake; ``main`` prints it as one line and returns 2."""


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose mistakes are one line (``prog: error: message``), exit status 2."""

    def error(self, message: str) -> NoReturn:
        report(self.prog, f"{message} (see {self.prog} --help)")
        sys.exit(USAGE_STATUS)


def report(prog: str, message: str) -> int:
    """Print ``message`` as one line on stderr and return the usage exit status."""
    print(f"{prog}: error: {' '.join(str(message).split())}", file=sys.stderr)
    return USAGE_STATUS


def reason(exc: Exception, name: str) -> str:
    """``exc``'s message without the leading ``name:`` or ``name:index:`` (where the line already names it)."""
    return re.sub(rf"^{re.escape(name)}(:\d+)?: ", "", str(exc))


def open_device(spec: str | None) -> Device:
    """``Device(spec)``; raise UsageError naming ``--backend`` or ``$GPUGRAPH_BACKEND`` when it names no
    usable device."""
    try:
        return Device(spec)
    except (BackendUnavailableError, ValueError) as exc:
        source = f"--backend {spec}" if spec is not None else f"{ENV_VAR}={os.environ.get(ENV_VAR, '')}"
        name = (spec if spec is not None else os.environ.get(ENV_VAR, "")).strip().partition(":")[0]
        raise UsageError(f"{source}: {reason(exc, name) if name else exc}") from None
