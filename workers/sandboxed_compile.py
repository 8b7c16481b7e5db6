"""One model compiled in the sandbox, in two processes, with every check on what comes back.

The repository's code (model files, pipeline, planners) runs in the first child, the
*import*, which hands over the model it built; every figure comes from the second, the
*compile*, which runs none of it (the README's "Trust boundary"). Both are
``python -m planner.tvm.job`` on a :class:`~planner.job_spec.JobSpec` written here; what
each hands back is checked here (:mod:`workers.trust`) and nowhere else. Boards say only
what they add to the job (:class:`BoardOptions`), never how it is run.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, field
from pathlib import Path

from planner.checkout_reads import CheckoutReads, InvalidReads, parse_reads
from planner.job_spec import CudaOptions, JobSpec, MicroOptions
from planner.report import StrategyReport
from planner.tvm.llm import handover as llm_imported
from planner.tvm.sources.handover import FILES, UNBOUND_FILE
from planner.tvm.toolchain import Toolchain
from workers import sandbox, trust
from workers.sandbox import view as view_module

log = logging.getLogger(__name__)


@dataclass
class CompileJob:
    """One model of a run, as a board compiles it: what the manifest says, and where the
    commit's files and the artifacts are."""

    model_name: str
    source: str
    params: dict
    strategies: list[str]
    artifacts_dir: Path
    repeat: int = 5
    #: The commit's checkout (read-only to the compile); None for zoo-only use.
    tree: Path | None = None
    #: ``path.py:function`` returning Relax passes (the manifest's ``[suite] pipeline``).
    pipeline: str = ""
    #: Host allocators to measure, overriding the board's (bisection needs none).
    memory_configs: tuple[str, ...] | None = None
    #: The TVM to compile with; None: the worker's own environment.
    toolchain: Toolchain | None = None
    #: The model's shape axis (``ShapeAxis.to_json()``): the points to compile at; None
    #: for a model without one.
    shapes: dict | None = None
    #: How its mixtures of experts are computed (the manifest's ``moe``).
    moe: str = "dense"

    @property
    def points(self) -> list[dict[str, int]]:
        """The points a report is expected for: the one empty point without an axis."""
        return list(self.shapes["points"]) if self.shapes else [{}]

    def failed(self, error: str, errors: dict[str, str] | None = None) -> list[StrategyReport]:
        """Every strategy at every point failed, each saying why."""
        return StrategyReport.failed_everywhere(
            self.model_name, self.strategies, error, points=self.points, source=self.source,
            errors=errors,
        )


@dataclass(frozen=True)
class BoardOptions:
    """What a board adds to its compile jobs."""

    #: Latency samples taken on this host; None: the job's own count.
    repeat: int | None = None
    #: Lift kernel temporaries into the plan (True), never (False), or per strategy (None).
    lift_temporaries: bool | None = None
    #: Host allocators to measure (:mod:`planner.tvm.measure.memory`); None: all of them.
    memory_configs: tuple[str, ...] | None = None
    #: Run, check and time on the compiling host (False for a board that does it itself).
    check_locally: bool = True
    micro: MicroOptions | None = None
    cuda: CudaOptions | None = None
    #: Show the child the host's GPU nodes, and bound it without an address-space limit.
    devices: bool = False


@dataclass
class SandboxedCompile:
    """Compiles one :class:`CompileJob` for ``target`` under ``limits``."""

    target: str
    limits: sandbox.Limits
    board: BoardOptions = field(default_factory=BoardOptions)

    def run(self, job: CompileJob) -> list[StrategyReport]:
        """One report per strategy and shape point, point by point, whatever happened."""
        artifacts = job.artifacts_dir.resolve()
        handed = artifacts / "import" / "network"
        toolchain = job.toolchain
        python = toolchain.python if toolchain else None
        folders = toolchain.folders if toolchain else ()
        spec = self.spec(job)
        if job.tree is None and not job.pipeline and job.source.startswith("zoo:"):
            # Peakwatch's own model, and nothing of the repository in play (no checkout: no
            # pipeline, no planner of its own): no code of the repository would run in an
            # import, which would only start TVM to hand over what the compile builds itself
            # as the CLI does.
            return self._compile(job, spec, None)
        reads: CheckoutReads | str | None = None
        try:
            with contextlib.ExitStack() as stack:
                tree, view = job.tree, None
                if tree is not None:
                    tree, view, reads = self._view(job, artifacts, stack)
                failed = sandbox.run_job(
                    spec.replace(
                        phase="import", out=str(handed),
                        base_dir=str(tree) if tree is not None else None,
                        pipeline=job.pipeline, planner_time_limit=self.limits.planner_seconds,
                    ),
                    artifacts / "import", tree=tree, limits=self.limits, python=python,
                    folders=folders,
                )
            if view is not None:
                reads = self._observed(job, view)
            if failed:
                # The import has no figures: only why each strategy could not be built.
                errors = {r.strategy: r.error for r in failed if r.error}
                first = next(iter(errors.values()), "the model's import returned reports, "
                             "not a model")
                return job.failed(first, errors)
            received = artifacts / "compile" / "network"
            # Only the micro board reads the unbound module: nothing else gets a second one.
            wanted = [f for f in FILES if spec.micro is not None or f != UNBOUND_FILE]
            # An LLM deployment comes as a folder per point instead (planner.tvm.llm.handover).
            wanted += llm_imported.handover_files(len(job.points))
            trust.copy_plain_files(handed, received, wanted, self.limits.file_bytes)
        except (sandbox.SandboxError, trust.HandoverError) as exc:
            return job.failed(f"SandboxError: {exc}")
        return self._compile(job, spec, received, reads)

    def _compile(
        self, job: CompileJob, spec: JobSpec, received: Path | None,
        reads: CheckoutReads | str | None = None,
    ) -> list[StrategyReport]:
        """The compile phase, on the model the import handed over (``received``), or on
        one it builds itself (None: a zoo model)."""
        artifacts = job.artifacts_dir.resolve()
        toolchain = job.toolchain
        try:
            reports = sandbox.run_job(
                spec.replace(
                    phase="compile", imported=str(received) if received else None,
                    artifacts_dir=str(artifacts / "compile" / "out"),
                    # Not run again: it says the framework's outputs may differ by design.
                    pipeline=job.pipeline,
                ),
                artifacts / "compile", limits=self.limits, devices=self.board.devices,
                python=toolchain.python if toolchain else None,
                folders=toolchain.folders if toolchain else (),
            )
        except sandbox.SandboxError as exc:
            return job.failed(f"SandboxError: {exc}")
        reports = trust.match(
            reports, model=job.model_name, source=job.source, strategies=job.strategies,
            points=job.points,
        )
        for report in reports:
            trust.collect_artifacts(
                report, artifacts / "compile" / "out", model=job.model_name,
                limit=self.limits.file_bytes,
            )
            if isinstance(reads, CheckoutReads):
                report.checkout_reads = reads
            elif reads:
                report.whole_tree_because = reads
        return reports

    @staticmethod
    def _view(job: CompileJob, artifacts: Path, stack: contextlib.ExitStack):
        """The checkout as the import sees it: through a view this worker serves, which
        records what it looked at (:mod:`workers.sandbox.view`), where this host can serve
        one; else the checkout itself, and why the Result is keyed by the whole tree."""
        why_not = view_module.unavailable()
        if why_not:
            return job.tree, None, f"no view of the checkout here: {why_not}"
        try:
            view = stack.enter_context(
                view_module.CheckoutView(job.tree, artifacts / "checkout-view")
            )
        except view_module.ViewError as exc:
            log.warning("%s: %s; keyed by the whole tree", job.model_name, exc)
            return job.tree, None, f"the view of the checkout failed: {exc}"
        return view.mountpoint.resolve(), view, None

    @staticmethod
    def _observed(job: CompileJob, view) -> CheckoutReads | str:
        """What the view saw the import look at, or why the Result is keyed by the whole
        tree instead. A record that is missing or refused never fails the compile: it only
        makes the cache less precise."""
        record = view.record()
        if record is None:
            why = view.stderr.splitlines()[-1] if view.stderr else "no record"
            log.warning("%s: the view of the checkout ended with %s: %s", job.model_name,
                        view.exit_status, view.stderr)
            return f"the view of the checkout did not end cleanly (exit {view.exit_status}: " \
                f"{why[:300]})"
        if "incomplete" in record:
            return f"what the import looked at is past the record's limits: " \
                f"{record['incomplete']}"
        try:
            return parse_reads(record)
        except InvalidReads as exc:
            log.warning("%s: %s; keyed by the whole tree", job.model_name, exc)
            return f"what the import looked at is past the record's limits: {exc}"

    def spec(self, job: CompileJob) -> JobSpec:
        """What both phases share; each adds its own fields."""
        board = self.board
        return JobSpec(
            model=job.model_name,
            source=job.source,
            params=dict(job.params),
            moe=job.moe,
            strategies=tuple(job.strategies),
            target=self.target,
            toolchain=job.toolchain.spec if job.toolchain is not None else "",
            shapes=job.shapes,
            repeat=job.repeat if board.repeat is None else board.repeat,
            lift_temporaries=board.lift_temporaries,
            check_locally=board.check_locally,
            memory_configs=(
                job.memory_configs if job.memory_configs is not None else board.memory_configs
            ),
            micro=board.micro,
            cuda=board.cuda,
        )
