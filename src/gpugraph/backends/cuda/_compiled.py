"""Whether the CUDA backend's compiled path (``_fast``: the driver calls of the paths users repeat, through
``cuda.bindings.cydriver``) is present and in use. setup.py builds it where it can; elsewhere, or with
``GPUGRAPH_COMPILED=0`` in the environment, the backend makes the same calls through cuda-bindings' Python
wrappers (the pure-Python path), with the same results and errors.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from ..._core import TURNED_OFF

fast: ModuleType | None = None
status: str  # a line for `python -m gpugraph info`

if TURNED_OFF:
    status = "turned off (GPUGRAPH_COMPILED=0): the pure-Python path"
else:
    name = f"{__package__}._fast"  # (built by setup.py, or absent)
    if importlib.util.find_spec(name) is None:
        status = "not built (see setup.py): the pure-Python path"
    else:
        try:
            fast = importlib.import_module(name)
        # (ImportError: cuda-bindings, its cydriver, is missing here; TypeError: its cydriver declares another C
        # signature than the one built against. Either way the Python path runs, and info says why.)
        except Exception as error:  # noqa: BLE001 - reported in the status line
            status = f"built but not importable ({type(error).__name__}: {error}): the pure-Python path"
        else:
            from cuda.bindings import driver as cu

            from ..._graph_node import Node
            from ..._host_threads import HOST_THREADS
            from ..._memory import Array
            from ..._nodes import KernelParams
            # (What its packing takes as an Array; a captured launch's record; the nodes its lanes take; the mark
            # that sends a call to the Python path, which refuses it.)
            fast.set_types(Array, KernelParams, Node, cu.CUgraphNode, HOST_THREADS)
            status = "built (gpugraph.backends.cuda._fast)"
