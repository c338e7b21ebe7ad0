"""Instantiated CPU graphs: nodes compiled once into calls, run in dependency order, with independent
branches on a thread pool.

At instantiate the DAG is cut into chains and planned (``_plan``); a run with several chains hands those that
become ready together to the pool (``_parallel``), or, with schedule fuzzing, runs them in an order and with an
overlap drawn from the executable graph's seeded ``schedule``. This module holds the executable graph (its state,
changes, launches and runs), the step each node kind makes, and the graphs that kernels launch.

A launch is one task on its stream, ordered after the previous launch of the same executable graph
(CUDA runs one instance at a time), made all or nothing against exceptions, KeyboardInterrupt included;
setters and updates publish a new plan with one assignment, so a launch runs the whole old or new graph.
"""

from __future__ import annotations

import functools
import itertools
import random
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any, NamedTuple

import numpy as np

from ..._conditions import condition_handle
from ..._errors import BackendError
from ..._event import event_handle
from ..._kernel import LaunchConfig
from ..._nodes import (
    AllocParams,
    ChildGraphParams,
    ConditionalParams,
    EmptyParams,
    EventRecordParams,
    EventWaitParams,
    FreeParams,
    HostParams,
    KernelParams,
    MemcpyParams,
    MemOpsParams,
    MemsetParams,
    NodeKind,
    SemaphoreSignalParams,
    SemaphoreWaitParams,
)
from ..._params import resolve
from .._graph_memory import GraphMemoryRules
from ._graphs import CpuGraph, CpuNode, copied
from ._host_kernel import RUNNING
from ._load import load as load_compiled
from ._ops import (
    map_allocation,
    run_kernel,
    run_mem_ops,
    run_memcpy,
    run_memset,
    run_semaphores,
    static_arg,
    static_operand,
    unmap_allocation,
)
from ._parallel import FuzzedRun, ParallelRun
from ._plan import Chain, Plan, Step, topological_order
from ._streams import Completion
from ._timeline import RECORDING, Watch, key_like, launch_watch, timed

# Executable graph ids, as CUDA's: unique in the process.
_exec_ids = itertools.count(1)


# Executable graphs instantiated with device_launch, by the number a kernel takes for them (their id).
_LAUNCHABLE: weakref.WeakValueDictionary[int, CpuExec] = weakref.WeakValueDictionary()
# cudaGraphLaunch's modes (the named stream's top byte): a tail launch runs after the launching graph, a
# fire-and-forget one when the kernel has run, a sibling one after the launching graph's nodes, while it runs.
_TAIL, _FIRE_AND_FORGET, _SIBLING = 1, 2, 3
_running_lock = threading.Lock()  # (taken to mark a graph running in RUNNING)


class CpuExec:
    """An executable graph of the CPU backend.

    It runs a private copy of the graph it was instantiated from (``template``), so later changes to
    that graph do not reach it; a setter publishes the changed node with a new plan, an update (or a
    change of a child graph or event) a new copy with a new plan, all or nothing. Each launch from the
    host runs the plan published when it was launched, as CUDA applies changes only to later launches,
    and a launch from a kernel the plan last uploaded (``uploaded``: an upload waits for the launches made
    before it, as CUDA's); each runs after the previous one has finished, as CUDA runs one instance of an
    executable graph at a time (whatever the streams and threads).

    With ``schedule_seed`` (schedule fuzzing), its runs draw the order and overlap of their ready chains from
    ``schedule``, a ``random.Random(schedule_seed)`` that each run advances, so that one seed gives the same
    schedules launch after launch; its child graphs and conditional bodies get the same seed.
    """

    def __init__(self, graph: CpuGraph, auto_free_on_launch: bool, node_priority: bool,
                 pool: Callable[[], Executor], device_launch: bool = False, owner: CpuExec | None = None,
                 schedule_seed: int | None = None) -> None:
        self._pool = pool
        self.schedule_seed = schedule_seed
        self.schedule = None if schedule_seed is None else random.Random(schedule_seed)
        self.id = next(_exec_ids)
        # The executable graph whose launch runs this one's nodes (itself, but for a child graph's or a body's):
        # the graph its kernels' cudaGetCurrentGraphExec names, and that runs the graphs they launch after it.
        self.owner = self if owner is None else owner
        self.launched: list[tuple[CpuExec, int]] = []  # tail and sibling launches of its kernels, with their modes
        # The conditions of the plan it runs now (Plan.conditions), which its kernels, its bodies' and its child
        # graphs' may set: set by each run (one at a time).
        self.conditions: np.ndarray | None = None
        # Held by each run, host-launched or launched from a kernel: one instance runs at a time, as on CUDA (a
        # host launch is also ordered after the previous one: last_done; a kernel's launch is not).
        self.running = threading.Lock()
        if device_launch:
            _LAUNCHABLE[self.id] = self
        self.auto_free_on_launch = auto_free_on_launch
        self.node_priority = node_priority  # instantiated with use_node_priority (update keeps the priorities)
        self.template = graph.clone()  # what it runs, and what a launch into a capture embeds
        if owner is not None:  # a child graph's or body's: its nodes are keyed by the front end's, as its parent's are
            key_like(self.template, graph)
        self.disabled: set[CpuNode] = set()
        # Held while a launch is made or a plan published: the order of instances and the plan they run.
        self._lock = threading.Lock()
        self.last_done: threading.Event | None = None  # set when the latest launch has run
        self._draft: list[list[Step]] | None = None  # the plan's steps, when no launch has taken them yet
        order = topological_order(self.template)
        self.memory = GraphMemoryRules.of([n.alloc for n in order if n.params.kind is NodeKind.MEM_ALLOC],
                                          [n.alloc for n in order if n.params.kind is NodeKind.MEM_FREE],
                                          auto_free_on_launch)
        self.plan = self._make_plan(order, self.disabled)
        # What a kernel's launch of it runs (device_launch): the plan when last uploaded, as on CUDA.
        self.uploaded: Plan | None = None
        if device_launch:
            self.upload()

    def upload(self) -> None:
        """Make the plan now the one kernels' launches run (CUDA's upload of the graph's device copy)."""
        with self._lock:
            self._draft = None  # (taken: a later change copies the steps)
            self.uploaded = self.plan

    def _make_plan(self, order: list[CpuNode], disabled: set[CpuNode]) -> Plan:
        """Cut the graph into chains and compile every node's call, ``disabled`` nodes as no-ops (not
        published: the caller does)."""
        records: list[tuple[Any, list]] = []
        waits: list[tuple[Any, list]] = []
        chains: list[Chain] = []
        steps: list[list[Step]] = []
        where: dict[CpuNode, tuple[int, int]] = {}
        chain_of: dict[CpuNode, Chain] = {}
        for node in order:
            deps = node.deps
            if len(deps) == 1 and len(deps[0].dependents) == 1:
                chain = chain_of[deps[0]]
            else:
                chain = Chain(len(chains))
                chain.preds = {chain_of[d] for d in deps}
                chains.append(chain)
                steps.append([])
            chain_of[node] = chain
            step = _NOOP if node in disabled else self._compile(node.params, node.alloc, records, waits)
            if step is not None:
                where[node] = (chain.index, len(steps[chain.index]))
                steps[chain.index].append(step)
        for chain in chains:
            for pred in chain.preds:
                pred.successors.append(chain)
        return Plan(chains, steps, where, records, waits, _conditions(order))

    def _compile(self, p: Any, alloc: Any, records: list[tuple[Any, list]],
                 waits: list[tuple[Any, list]]) -> Step | None:
        """The call a node of parameters ``p`` (and allocation ``alloc``) makes, every view that can be made
        now made now (None: the node does nothing)."""
        return _kind(p).step(p, alloc, self, records, waits)

    # Changes: each builds what it changes aside, then publishes it under the lock with one statement of
    # plain stores after the last call (so an exception, KeyboardInterrupt included, comes before the
    # change or after it: never midway), and a launch runs the whole old or the whole new graph.

    def _replace_step(self, node: CpuNode, params: Any, disabled: set[CpuNode]) -> None:
        """Give one node ``params`` and a new call (a no-op if in ``disabled``), in a copy of its chain's
        steps (a launch made may still run the old), and publish them with ``disabled``."""
        # Not None: only nodes with a step are in ``where`` (_compile returns None for empty nodes alone).
        step: Step = _NOOP if node in disabled else self._compile(params, node.alloc, [], [])  # type: ignore[assignment]
        with self._lock:
            plan = self.plan
            index, position = plan.where[node]
            chain_steps = list(plan.steps[index])
            chain_steps[position] = step
            steps = self._draft
            if steps is None:  # launches hold the published steps: change a copy
                steps = list(plan.steps)
                plan = plan.with_steps(steps)
            steps[index] = chain_steps  # no launch has taken these steps (published or not) yet
            node.params, self.disabled, self.plan, self._draft = params, disabled, plan, steps

    def _rebuild(self, changes: dict[CpuNode, Any], attributes: dict[CpuNode, Any] | None = None) -> None:
        """Publish a new copy of the graph with ``changes`` (original node -> parameters) and ``attributes`` (original
        node -> KernelAttributes) and a plan made from it; until then the old copy and plan stay whole."""
        old = self.template
        template = old.clone()
        moved = template.clone_of  # node of the old copy -> node of the new one
        for original, params in changes.items():
            moved[old.clone_of[original]].params = copied(params)
        for original, taken in (attributes or {}).items():
            moved[old.clone_of[original]].attributes = taken
        key_like(template, old)  # (keyed by the original nodes, as the old copy, and the graphs inside it too)
        disabled = {moved[node] for node in self.disabled}
        plan = self._make_plan(topological_order(template), disabled)
        with self._lock:
            self.template, self.disabled, self.plan, self._draft = template, disabled, plan, None

    def set_node(self, original: CpuNode, params: Any) -> None:
        if _kind(params).in_place:
            self._replace_step(self.template.clone_of[original], params, self.disabled)
        else:  # child graphs and events take part in planning (event records and waits): plan again
            self._rebuild({original: params})

    def set_enabled(self, original: CpuNode, enabled: bool) -> None:
        node = self.template.clone_of[original]
        disabled = self.disabled - {node} if enabled else self.disabled | {node}
        self._replace_step(node, node.params, disabled)

    def update(self, graph: CpuGraph, originals: list[CpuNode]) -> None:
        """Take the parameters of ``graph``, whose nodes pair with ``originals`` in creation order: all or
        nothing, so the same update made again after an exception makes it whole."""
        self._rebuild({original: new.params for original, new in zip(originals, graph.nodes)},
                      {original: new.attributes for original, new in zip(originals, graph.nodes)})

    # Running

    def launch(self, stream: Any) -> None:
        """Submit one run to ``stream``, ordered after the previous launch of this graph on any stream.

        All or nothing, KeyboardInterrupt included: the run is submitted and every state change it makes
        (the previous-launch marker, event records, graph-memory liveness) stands, or none does. What
        may be interrupted is undone, unless the stream's worker already took the run (it then runs).
        """
        with self._lock:  # instances are ordered in the order their launches take the marker
            plan, memory = self.plan, self.memory
            if memory is not None:
                memory.check()
            previous = self.last_done
            done = threading.Event()
            fired = [Completion() for _ in plan.records] if plan.records else ()
            # A wait node waits for its event's latest record before this launch's own (never
            # recorded: it completes at once), as a stream wait does at the time of the call.
            bound = [event.latest for event, _ in plan.waits] if plan.waits else ()
            run = _launch_run(stream.index) if RECORDING else CpuExec.run  # (decided once: a timeline records it?)
            ticket = [(plan, previous, done, fired, bound, run)]  # taken (popped) by the run or by a cancel
            undo = _Undo(plan, memory) if fired or memory is not None else None
            try:
                self.last_done = done
                self._draft = None  # the steps are taken: a later change copies them
                if fired:
                    for (event, _), completion in zip(plan.records, fired):
                        event.latest = completion
                if memory is not None:
                    memory.commit()
                stream.submit(self._run_instance, (ticket,))
            except BaseException:
                if _take(ticket):  # the run will not start: undo everything this launch changed
                    self.last_done = previous
                    if undo is not None:
                        undo.restore(fired)
                raise

    def _run_instance(self, ticket: list) -> None:
        """A launch's task on its stream: wait for the previous instance, run, mark this one done."""
        try:
            plan, previous, done, fired, bound, run = ticket.pop()
        except IndexError:  # the launch was interrupted and undone before the stream reached it
            return
        try:
            if previous is not None:
                previous.wait()
            for (_, slot), completion in zip(plan.records, fired):
                slot[0] = completion
            for (_, slot), completion in zip(plan.waits, bound):
                slot[0] = completion
            for condition in plan.resets:  # (cudaGraphCondAssignDefault: at the start of each launch)
                condition.cell[0] = condition.default
            _run_launched(self, plan, run)
        finally:
            done.set()

    def forget(self) -> None:
        """Released: no kernel launches it any more."""
        _LAUNCHABLE.pop(self.id, None)

    def run(self, plan: Plan | None = None) -> None:
        """Run every node once, in dependency order; raise the first error after all have run."""
        if plan is None:
            plan = self.plan
        steps = plan.steps
        if len(steps) != 1:  # (a single chain has one order: nothing to draw)
            if self.schedule is None:
                ParallelRun(self._pool(), plan).drive()
            else:
                FuzzedRun(self._pool(), plan, self.schedule).drive()
            return
        error = None
        for fn, args in steps[0]:
            try:
                fn(*args)
            except BaseException as exc:  # noqa: BLE001 - re-raised below, after the graph completes
                error = error or exc
        if error is not None:
            raise error

    def run_recorded(self, plan: Plan | None, watch: Watch) -> None:
        """``run``, as part of the recorded launch ``watch``: each kernel, copy, memset and host node timed, named by
        the front end's node it is a copy of, and the graphs its nodes run (child graphs, bodies, the graphs its
        kernels launch) recorded too."""
        if plan is None:
            plan = self.plan
        origins = {node: original for original, node in self.template.clone_of.items()}
        recorded = functools.partial(CpuExec.run_recorded, watch=watch)
        steps = [list(chain) for chain in plan.steps]
        for node, (chain, position) in plan.where.items():
            step = steps[chain][position]
            if step is not _NOOP:  # (a disabled node runs nothing)
                steps[chain][position] = _recorded_step(node.params, step, recorded, watch, self.owner,
                                                        origins.get(node))
        self.run(plan.with_steps(steps))


# How a launch runs a graph (``_run_launched``'s ``run``): CpuExec.run, or for a launch a timeline records, its
# run_recorded with the launch's Watch.
Run = Callable[[CpuExec, Plan | None], None]


def _launch_run(index: int) -> Run:
    """How a graph launched now on device ``index`` runs: recorded, as one launch, if a timeline records it."""
    watch = launch_watch(index)
    return CpuExec.run if watch is None else functools.partial(CpuExec.run_recorded, watch=watch)


def _recorded_step(params: object, step: Step, recorded: Run, watch: Watch, graph_exec: CpuExec,
                   node: CpuNode | None) -> Step:
    """The step of a node of parameters ``params`` in a run that ``watch`` records: the work of a kernel, copy,
    memset or host node timed (named by the front end's ``node``), the graphs a child-graph or conditional node runs
    or a kernel launches run by ``recorded``."""
    fn, args = step
    if isinstance(params, ChildGraphParams):  # (CpuExec.run, (child,))
        return recorded, (args[0], None)
    if isinstance(params, ConditionalParams):  # (a runner of _RUN_CONDITIONAL, (cell, bodies))
        return fn, (*args, recorded)
    if fn is _run_kernel_in_graph:
        step = fn, (*args, recorded)
    if isinstance(params, (KernelParams, MemcpyParams, MemsetParams, HostParams)):  # (the kinds a timeline times)
        return timed(watch, params, graph_exec, node, step)
    return step


def _run_launched(graph: CpuExec, plan: Plan | None = None, run: Run = CpuExec.run) -> None:
    """Run a launch of ``graph`` (of ``plan``: a host launch's; else a kernel's, of the plan last uploaded) with
    what its kernels launch, then its tail launches and theirs, in the order asked, each by ``run``: a loop, not a
    recursion, so a graph that relaunches itself as a tail launch runs as many times as it asks."""
    tails = [graph]
    while tails:
        launched = tails.pop()
        if plan is None:  # (a kernel's launch: of a graph instantiated with device_launch, so uploaded)
            plan = launched.plan if launched.uploaded is None else launched.uploaded
        tails.extend(reversed(_run_once(launched, plan, run)))
        plan = None


def _run_once(graph: CpuExec, plan: Plan, run: Run) -> list[CpuExec]:
    """One run of ``graph`` by ``run``, its fire-and-forget launches (run by its kernels' steps) and its sibling
    launches included, marked running all along (the header's cudaGraphLaunch refuses a running graph); its tail
    launches."""
    with graph.running:  # one instance at a time, host-launched or not (a kernel never launches a running one)
        slot = None
        if graph.uploaded is not None:  # (instantiated with device_launch: a kernel may name it)
            with _running_lock:
                free = np.flatnonzero(RUNNING == 0)
                if not len(free):
                    raise BackendError("cpu", "cudaGraphLaunch", "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
                                       f"more than {len(RUNNING)} executable graphs kernels may launch run at once")
                slot = int(free[0])
                RUNNING[slot] = graph.id
        try:
            graph.launched, graph.conditions = [], plan.conditions
            run(graph, plan)
            launched = graph.launched
            for sibling, mode in launched:
                if mode == _SIBLING:
                    _run_launched(sibling, None, run)
        finally:
            if slot is not None:
                RUNNING[slot] = 0
    return [tail for tail, mode in launched if mode == _TAIL]


def _run_kernel_in_graph(kernel: Any, launch: LaunchConfig, args: tuple, device: int, owner: CpuExec,
                         run: Run = CpuExec.run) -> None:
    """Run a compiled kernel of a graph on CPU device ``device``: it may set the conditions of the graph ``owner``
    runs, and launch graphs (cudaGraphLaunch): a fire-and-forget launch runs now (by ``run``), when the kernel has
    run (the launching graph completes after it, as on CUDA); a tail or sibling launch is kept for ``owner`` to run
    after the graph."""
    for number, mode in load_compiled(kernel, device).launch(launch.grid, launch.block, launch.shared_mem, args,
                                                             owner.id, owner.conditions):
        graph = _LAUNCHABLE.get(number)
        if graph is None:
            raise BackendError("cpu", "cudaGraphLaunch", "CUDA_ERROR_ILLEGAL_ADDRESS",
                               f"{kernel!r} launched {number:#x}, which names no open executable graph instantiated "
                               f"with device_launch=True")
        if mode == _FIRE_AND_FORGET:
            _run_launched(graph, None, run)
        else:
            owner.launched.append((graph, mode))


class _Undo:
    """What a launch changes besides the marker, as it was before, to put back if the launch is undone."""

    __slots__ = ("events", "before", "memory", "live")

    def __init__(self, plan: Plan, memory: GraphMemoryRules | None) -> None:
        self.events = [event for event, _ in plan.records]
        self.before = [event.latest for event in self.events]
        self.memory = memory
        self.live = [] if memory is None else [a.live for a in memory.left_live + memory.frees_foreign]

    def restore(self, fired: Any) -> None:
        for event, completion, latest in zip(self.events, fired, self.before):
            if event.latest is completion:  # not recorded again since
                event.latest = latest
        if self.memory is not None:
            for alloc, live in zip(self.memory.left_live + self.memory.frees_foreign, self.live):
                alloc.live = live


def _take(ticket: list) -> bool:
    """Take a launch's ticket: True for the first taker (list.pop is atomic), False after."""
    try:
        ticket.pop()
    except IndexError:
        return False
    return True


def _fire(slot: list) -> None:
    slot[0].fire()


def _wait(slot: list) -> None:
    completion = slot[0]
    if completion is not None:
        completion.flag.wait()


def _nothing() -> None:
    """A disabled node's step."""


_NOOP: Step = (_nothing, ())



# What each node kind does on the CPU backend: one entry per parameter record type.

Records = list[tuple[Any, list]]


class _Kind(NamedTuple):
    """How the CPU backend runs one node kind: ``step(params, alloc, exec_, records, waits)`` makes the node's
    call once per plan (None: it does nothing; event nodes add their slot to ``records`` or ``waits``), and
    ``in_place`` says whether a setter may swap that call alone (else the plan is made again: child graphs
    and events take part in planning)."""

    step: Callable[[Any, Any, CpuExec, Records, Records], Step | None]
    in_place: bool


def _kernel_step(p: KernelParams, alloc: Any, exec_: CpuExec, records: Records, waits: Records) -> Step:
    kernel = p.kernel
    args = tuple(static_arg(a) for a in kernel.typed_args(tuple(resolve(a) for a in p.args)))
    launch = LaunchConfig(p.grid, p.block, p.shared_mem)
    if kernel.cpu is None:  # (its compiled source may launch graphs: it is given the launch log of a graph's kernels)
        return _run_kernel_in_graph, (kernel, launch, args, p.device, exec_.owner)
    return run_kernel, (kernel, launch, args, p.device)


def _child_step(p: ChildGraphParams, alloc: Any, exec_: CpuExec, records: Records, waits: Records) -> Step:
    child = CpuExec(p.graph, False, False, exec_._pool, owner=exec_.owner, schedule_seed=exec_.schedule_seed)
    records.extend(child.plan.records)  # recorded and bound at each launch of this graph
    waits.extend(child.plan.waits)
    return CpuExec.run, (child,)


def _conditions(nodes: list[CpuNode]) -> list[Any]:
    """The conditions (CpuConditions) that conditional nodes among ``nodes``, or in their bodies, read."""
    found = []
    for node in nodes:
        p = node.params
        if isinstance(p, ConditionalParams):
            found.append(condition_handle(p.condition))
            for body in p.bodies:
                found.extend(_conditions(body.nodes))
    return found


def _conditional_step(p: ConditionalParams, alloc: Any, exec_: CpuExec, records: Records, waits: Records) -> Step:
    # (Bodies hold no event nodes: nothing to add to records or waits.)
    bodies = [CpuExec(body, False, False, exec_._pool, owner=exec_.owner, schedule_seed=exec_.schedule_seed)
              for body in p.bodies]
    return _RUN_CONDITIONAL[p.type], (condition_handle(p.condition).cell, bodies)


# A conditional node's step: ``run`` runs the body (``CpuExec.run``, or in a recorded run, run_recorded).


def _run_if(cell: Any, bodies: list[CpuExec], run: Run = CpuExec.run) -> None:
    if cell[0]:
        run(bodies[0], None)
    elif len(bodies) > 1:
        run(bodies[1], None)


def _run_while(cell: Any, bodies: list[CpuExec], run: Run = CpuExec.run) -> None:
    body = bodies[0]
    while cell[0]:
        run(body, None)


def _run_switch(cell: Any, bodies: list[CpuExec], run: Run = CpuExec.run) -> None:
    value = int(cell[0])
    if value < len(bodies):
        run(bodies[value], None)


_RUN_CONDITIONAL = {"if": _run_if, "while": _run_while, "switch": _run_switch}


def _record_step(p: EventRecordParams, alloc: Any, exec_: CpuExec, records: Records, waits: Records) -> Step:
    slot: list[Completion | None] = [None]
    records.append((event_handle(p.event), slot))
    return _fire, (slot,)


def _memcpy_step(p: MemcpyParams, *_: Any) -> Step:
    if p.box is None:
        return run_memcpy, (static_operand(p.dst, p.nbytes), static_operand(p.src, p.nbytes), p.nbytes)
    return run_memcpy, (static_operand(p.dst, p.dst.nbytes), static_operand(p.src, p.src.nbytes), p.nbytes, p.box)


def _memset_step(p: MemsetParams, *_: Any) -> Step:
    if p.height == 1 and not p.offset:
        return run_memset, (static_operand(p.dst, p.count * p.element_size), p.pattern, p.element_size, p.count)
    return run_memset, (static_operand(p.dst, p.dst.nbytes), p.pattern, p.element_size, p.count, p.pitch, p.height,
                        p.offset)


def _wait_step(p: EventWaitParams, alloc: Any, exec_: CpuExec, records: Records, waits: Records) -> Step:
    slot: list[Completion | None] = [None]
    waits.append((event_handle(p.event), slot))
    return _wait, (slot,)


_KINDS: dict[type, _Kind] = {
    KernelParams: _Kind(_kernel_step, True),
    MemcpyParams: _Kind(_memcpy_step, True),
    MemsetParams: _Kind(_memset_step, True),
    HostParams: _Kind(lambda p, *_: (p.fn, p.args), True),
    ChildGraphParams: _Kind(_child_step, False),
    EventRecordParams: _Kind(_record_step, False),
    EventWaitParams: _Kind(_wait_step, False),
    AllocParams: _Kind(lambda p, alloc, *_: (map_allocation, (alloc,)), False),
    FreeParams: _Kind(lambda p, alloc, *_: (unmap_allocation, (alloc,)), False),
    EmptyParams: _Kind(lambda *_: None, False),
    ConditionalParams: _Kind(_conditional_step, False),
    SemaphoreSignalParams: _Kind(lambda p, *_: (run_semaphores, (p,)), True),
    SemaphoreWaitParams: _Kind(lambda p, *_: (run_semaphores, (p,)), True),
    MemOpsParams: _Kind(lambda p, *_: (run_mem_ops, (p,)), True),
}


def _kind(params: Any) -> _Kind:
    kind = _KINDS.get(type(params))
    if kind is None:
        raise TypeError(f"cpu: no step for parameters of type {type(params).__name__}")
    return kind
