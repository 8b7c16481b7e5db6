"""Export, build and run a model on an emulated micro board under several strategies.

For each strategy the export is built twice: for the board (run on QEMU) and for this host
(run as a process). Both are compared with TVM's stock build on the host, on the same
input: when the host build matches and the board does not, the target is at fault (its
compiler, libm or the emulator), not the plan; when neither matches, the plan is.
"""

from __future__ import annotations

import dataclasses
import logging
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from planner.report import ATOL, RTOL
from planner.tvm.micro import build as builder
from planner.tvm.micro import emulator
from planner.tvm.micro.boards import Board, get_board
from planner.tvm.micro.export import ExportedProject, ExportError, write_project
from planner.tvm.micro.plan import MicroPlanError, example_inputs, plan_models
from planner.tvm.network import Network
from planner.tvm.sources import ModelSource, build_network

log = logging.getLogger(__name__)

#: What ``instructions`` counts, for anyone showing it next to a latency.
INSTRUCTIONS_LABEL = "instructions executed by one inference (QEMU TCG plugin count, not time)"


@dataclass
class MicroResult:
    """One strategy's build on one board: whether it is right, what it needs, if it fits."""

    model: str
    strategy: str
    board: str
    machine: str
    #: The board's outputs against TVM's stock build on the host (None: never ran).
    outputs_match: bool | None = None
    #: The same export built for this host, against the same reference.
    host_outputs_match: bool | None = None
    max_abs_diff: float | None = None
    #: Static RAM (.data + .bss: arena, workspace region, input/output buffers, the rest)
    #: plus the stack's measured high-water mark.
    ram_bytes: int | None = None
    #: Code, constants and weights: every allocated section with contents.
    flash_bytes: int | None = None
    arena_bytes: int | None = None
    workspace_bytes: int | None = None
    #: What the kernels really took of the workspace region during the run.
    workspace_used_bytes: int | None = None
    static_ram_bytes: int | None = None
    stack_bytes: int | None = None
    io_bytes: int | None = None
    weights_bytes: int | None = None
    #: Instructions executed by one inference (see INSTRUCTIONS_LABEL): not a time.
    instructions: int | None = None
    sram_capacity: int | None = None
    flash_capacity: int | None = None
    over_capacity: bool | None = None
    lifted_temporaries: bool | None = None
    export_dir: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_json(self) -> dict:
        return asdict(self)


def run_micro(
    source: ModelSource,
    strategies: Sequence[str],
    *,
    board: str | Board = "stm32f746",
    work_dir: str | Path | None = None,
    seed: int = 0,
    base_dir: str | Path | None = None,
    model_name: str | None = None,
    timeout: float = 600,
    jobs: int = 2,
    pipeline: str = "",
    network: Network | None = None,
) -> list[MicroResult]:
    """Export ``source`` under each strategy, build it, run it on the board and on the host.

    One failing strategy does not stop the others; each result says what went wrong in
    ``error``. Exports are written to ``work_dir/STRATEGY`` (kept) or to a temporary
    folder (removed). ``pipeline`` is the suite's ``path.py:function`` of Relax passes,
    found under ``base_dir`` and run on the model before planning, as ``compile_model`` does.
    Raises ``ValueError`` for an unknown strategy or board. ``network`` is the model already
    built, with its weights as inputs and the pipeline run (a worker's import phase).
    """
    spec = get_board(board)
    offline = builder.micro_toolchain_missing()
    root = Path(base_dir) if base_dir else None
    if network is None:
        network = build_network(source, base_dir=root)
    if pipeline and not offline:
        from planner.tvm import repo_code

        mod = repo_code.run_pipeline(network.mod, pipeline, root, spec.tvm_target())
        network = dataclasses.replace(network, mod=mod)
    name = model_name or network.name
    results = {
        s: MicroResult(
            model=name, strategy=s, board=spec.name, machine=spec.machine,
            sram_capacity=spec.sram_bytes, flash_capacity=spec.flash_bytes,
        )
        for s in strategies
    }
    if offline:
        for result in results.values():
            result.error = f"offline: {offline}"
        return list(results.values())

    inputs = example_inputs(network, seed)
    reference = reference_outputs(network, inputs)
    planned = plan_models(network, strategies, spec.tvm_target(), seed=seed)

    with tempfile.TemporaryDirectory(prefix="peakwatch-micro-") as scratch:
        root = Path(work_dir) if work_dir is not None else Path(scratch)

        projects = []
        # Exports run one at a time: TVM's passes are not known to be thread-safe.
        for strategy in strategies:
            result, plan = results[strategy], planned[strategy]
            if isinstance(plan, MicroPlanError):
                result.error = str(plan)
                continue
            folder = root / _slug(strategy)
            try:
                projects.append((write_project(plan, folder, inputs, spec), result))
            except ExportError as exc:
                result.error = f"export: {exc}"
                continue
            if work_dir is not None:
                result.export_dir = str(folder)

        def build_and_run(item) -> None:
            project, result = item
            _build_and_run(project, spec, inputs, reference, result, timeout)

        # Compilers and emulators are separate processes: those can overlap.
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            list(pool.map(build_and_run, projects))
    return list(results.values())


def reference_outputs(network: Network, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """TVM's stock build (its own planner, LLVM, the Relax VM) run on this host."""
    from planner.tvm.build import execute
    from planner.tvm.build.target import make_target
    from planner.tvm.plan import lowering
    target = make_target("llvm")
    lowered = lowering.lower_to_allocations(network.mod, target)
    planned = lowering.plan_with_stock_planner(lowered, target)
    final = lowering.finish_lowering(planned, target, stock_planner=False)
    executable = execute.build(final, target)
    dev = execute.device_for(target)
    vm = execute.load(executable, dev)
    return execute.run_once(vm, dev, inputs, entry=network.entry)


def _decode(project: ExportedProject, data: bytes) -> list[np.ndarray]:
    return [
        np.frombuffer(data[o.offset : o.offset + o.size], dtype=o.dtype).reshape(o.shape)
        for o in project.outputs
    ]


def _compare(
    project: ExportedProject, reference: list[np.ndarray], data: bytes | None
) -> tuple[bool, float | None]:
    if data is None:
        return False, None
    from planner.tvm.build.execute import compare_outputs

    exact = all(np.issubdtype(r.dtype, np.integer) or r.dtype == np.bool_ for r in reference)
    # Integer models (int8) must agree bit for bit; floats to the host check's tolerance.
    rtol, atol = (0.0, 0.0) if exact else (RTOL, ATOL)
    return compare_outputs(reference, _decode(project, data), rtol=rtol, atol=atol)


def _build_and_run(
    project: ExportedProject, board: Board, inputs: list[np.ndarray],
    reference: list[np.ndarray], result: MicroResult, timeout: float,
) -> None:
    folder = project.directory
    input_bytes = np.ascontiguousarray(inputs[0]).tobytes()
    result.arena_bytes = project.arena_bytes
    result.workspace_bytes = project.workspace_bytes
    result.weights_bytes = project.weights_bytes
    result.lifted_temporaries = project.lifted_temporaries
    problems = []
    try:
        host = builder.build_for_host(folder, timeout=timeout)
        run = emulator.run_on_host(host, folder, input_bytes, timeout=timeout)
        result.host_outputs_match, _ = _compare(project, reference, run.output)
        if run.status != 0:
            problems.append(f"host build returned {run.status} ({run.report.get('error')})")
    except (builder.BuildError, emulator.EmulatorError, OSError) as exc:
        problems.append(f"host: {exc}")
    try:
        elf = builder.build_for_board(folder, board, timeout=timeout)
    except builder.BuildError as exc:
        result.error = f"board build: {exc}"
        if exc.out_of_memory:
            result.over_capacity = True
        return
    image = builder.read_image(elf)
    result.flash_bytes = image.flash_bytes
    result.static_ram_bytes = image.static_ram_bytes
    result.io_bytes = image.io_bytes
    if image.uses_heap:
        problems.append("the image links a heap allocator")
    try:
        run = emulator.run_on_emulator(
            elf, board, folder, input_bytes, timeout=timeout,
            begin_address=image.begin_address, end_address=image.end_address,
        )
    except emulator.EmulatorError as exc:
        problems.append(f"emulator: {exc}")
        run = None
    if run is not None:
        result.instructions = run.instructions
        if run.status != 0:
            problems.append(f"board run returned {run.status} ({run.report.get('error')})")
        if "stack_bytes" in run.report:
            result.stack_bytes = int(run.report["stack_bytes"])
        if "workspace_bytes" in run.report:
            result.workspace_used_bytes = int(run.report["workspace_bytes"])
        result.outputs_match, result.max_abs_diff = _compare(project, reference, run.output)
        if result.stack_bytes is not None:
            result.ram_bytes = image.static_ram_bytes + result.stack_bytes
    # Without a run, the static RAM alone already says whether the board is too small.
    ram = result.ram_bytes if result.ram_bytes is not None else image.static_ram_bytes
    result.over_capacity = ram > board.sram_bytes or image.flash_bytes > board.flash_bytes
    if result.outputs_match is False:
        blame = "the target" if result.host_outputs_match else "the plan"
        problems.append(f"outputs differ from TVM's stock build (host build matches: "
                        f"{result.host_outputs_match}; {blame} is at fault)")
    if problems:
        result.error = "; ".join(problems)


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in text)
