from __future__ import annotations

import platform
from dataclasses import dataclass, field
from pathlib import Path

from planner.report import StrategyReport
from planner.tvm.imported import FILES, UNBOUND_FILE
from planner.tvm.toolchain import Toolchain
from workers import sandbox, trust
from workers.boards.config import BoardConfig


class UnknownBoard(LookupError):
    pass


@dataclass(frozen=True)
class Health:
    """Whether the board can run models now, and if not, why (shown on the boards page)."""

    online: bool
    reason: str = ""

    def to_json(self) -> dict:
        return {"status": "online" if self.online else "offline", "reason": self.reason}


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
    options: dict = field(default_factory=dict)
    #: The TVM to compile with; None: the worker's own environment.
    toolchain: Toolchain | None = None
    #: The model's shape axis (``ShapeAxis.to_json()``): the points to compile at; None
    #: for a model without one.
    shapes: dict | None = None

    @property
    def points(self) -> list[dict[str, int]]:
        """The points a report is expected for: the one empty point without an axis."""
        return list(self.shapes["points"]) if self.shapes else [{}]


class BoardRunner:
    """Compiles and measures models for one board.

    :meth:`measure` is the template every board shares: compile in the sandbox with the
    board's options (:meth:`compile_options`), then let the board add what only it can
    measure (:meth:`after_compile`) to the typed reports.
    """

    kind = "cpu"
    default_target = "llvm"
    #: Whether the sandboxed compile needs the host's devices (a GPU).
    needs_devices = False

    def __init__(self, config: BoardConfig | None = None, *, limits: sandbox.Limits | None = None):
        self.config = config or BoardConfig(name=self.kind, kind=self.kind)
        self.name = self.config.name
        self.limits = limits or sandbox.Limits()

    @property
    def target(self) -> str:
        """The target string compiled for; part of the compile-cache key."""
        return self.config.target_string or self.default_target

    @property
    def memory_capacity(self) -> int | None:
        return self.config.memory_capacity

    @property
    def cache_identity(self) -> str:
        """What, besides the model and strategy, decides the figures: part of the cache key."""
        return self.target

    def health(self) -> Health:
        """Whether the board can run models now: the sandbox first, then the board itself.

        A worker with only the reduced sandbox is offline unless a setting allows it, so a
        run sent to it fails every Result with the reason instead of running repository code
        with the host's files in reach.
        """
        refused = sandbox.refusal(self.limits)
        if refused:
            return Health(online=False, reason=refused)
        return self.board_health()

    def board_health(self) -> Health:
        """The board's own health (a GPU present, an RPC server answering)."""
        return Health(online=True)

    def describe(self) -> dict:
        """What the dashboard shows about this board's worker."""
        import celery

        from planner.tvm.host import environment

        return {
            "kind": self.kind,
            "target": self.target,
            "host": platform.node(),
            "versions": {**environment(), "celery": celery.__version__},
            "sandbox": {
                **sandbox.mode(self.limits.user, self.limits.group).to_json(),
                "allowed": not sandbox.refusal(self.limits),
            },
        }

    def compile_options(self, job: CompileJob) -> dict:
        """What this board checks and measures on the worker's host (compile_model options)."""
        return {"repeat": job.repeat}

    def after_compile(self, job: CompileJob, reports: list[StrategyReport]) -> None:
        """Add the board's own figures to ``reports``; the host's are already there."""

    def measure(
        self,
        *,
        model_name: str,
        source: str,
        params: dict,
        strategies: list[str],
        artifacts_dir: Path,
        repeat: int,
        tree: Path | None = None,
        pipeline: str = "",
        toolchain: Toolchain | None = None,
        shapes: dict | None = None,
    ) -> list[StrategyReport]:
        """One report per strategy and shape point, point by point."""
        job = CompileJob(
            model_name=model_name, source=source, params=params, strategies=list(strategies),
            artifacts_dir=Path(artifacts_dir), repeat=repeat, tree=tree, pipeline=pipeline,
            toolchain=toolchain, shapes=shapes,
        )
        reports = self.compile(job)
        self.after_compile(job, [r for r in reports if r.ok])
        # Stored with each Result, so the run page says what the repository's code ran in.
        box = "full" if sandbox.mode(self.limits.user, self.limits.group).full else "reduced"
        for report in reports:
            report.environment["sandbox"] = box
        return reports

    def compile(self, job: CompileJob) -> list[StrategyReport]:
        """``planner.tvm.compile.compile_model`` for this board's target, sandboxed, in two
        processes (``planner.tvm.job``): the repository's code runs in the first, which
        hands over the model it built; every figure comes from the second, which runs none
        of it. What each hands back is checked (:mod:`workers.trust`)."""
        artifacts = job.artifacts_dir.resolve()
        toolchain = job.toolchain
        common = {
            "model": job.model_name,
            "source": job.source,
            "params": job.params,
            "strategies": job.strategies,
            "target": self.target,
        }
        if toolchain is not None:
            common["toolchain"] = toolchain.spec
        options = {**self.compile_options(job), **job.options}
        run = {
            "limits": self.limits,
            "python": toolchain.python if toolchain else None,
            "folders": toolchain.folders if toolchain else (),
        }
        handed = artifacts / "import" / "network"
        import_job = {
            **common,
            "phase": "import",
            "out": str(handed),
            "base_dir": str(job.tree.resolve()) if job.tree is not None else None,
            "pipeline": job.pipeline,
            "planner_time_limit": self.limits.planner_seconds,
            "lift_temporaries": options.get("lift_temporaries"),
            "micro": options.get("micro"),
            # The repository's planners plan each point: its problem is not the bound's.
            "shapes": job.shapes,
        }
        try:
            failed = sandbox.run_job(import_job, artifacts / "import", tree=job.tree, **run)
            if failed:
                return self._import_failed(job, failed)
            received = artifacts / "compile" / "network"
            # Only the micro board reads the unbound module: nothing else gets a second one.
            wanted = [f for f in FILES if options.get("micro") or f != UNBOUND_FILE]
            trust.copy_plain_files(handed, received, wanted, self.limits.file_bytes)
            compile_job = {
                **common,
                **options,
                "phase": "compile",
                "imported": str(received),
                "artifacts_dir": str(artifacts / "compile" / "out"),
            }
            if job.shapes:
                compile_job["shapes"] = job.shapes
            reports = sandbox.run_job(
                compile_job, artifacts / "compile", limits=self.limits,
                devices=self.needs_devices, python=run["python"], folders=run["folders"],
            )
        except (sandbox.SandboxError, trust.HandoverError) as exc:
            return self._failed(job, f"SandboxError: {exc}")
        reports = trust.match(
            reports, model=job.model_name, source=job.source, strategies=job.strategies,
            points=job.points,
        )
        for report in reports:
            trust.collect_artifacts(
                report, artifacts / "compile" / "out", model=job.model_name,
                limit=self.limits.file_bytes,
            )
        return reports

    def _import_failed(
        self, job: CompileJob, reports: list[StrategyReport]
    ) -> list[StrategyReport]:
        """The import phase's failed reports, by strategy and point; it has no figures."""
        errors = {r.strategy: r.error for r in reports if r.error}
        first = next(iter(errors.values()), "the model's import returned reports, not a model")
        return [
            StrategyReport.failed(
                job.model_name, strategy, errors.get(strategy, first), model_source=job.source,
                shape_point=dict(point),
            )
            for point in job.points
            for strategy in job.strategies
        ]

    def _failed(self, job: CompileJob, error: str) -> list[StrategyReport]:
        # Every point fails: each is a Result of its own, and each must say why.
        return [
            StrategyReport.failed(
                job.model_name, strategy, error, model_source=job.source,
                shape_point=dict(point),
            )
            for point in job.points
            for strategy in job.strategies
        ]
