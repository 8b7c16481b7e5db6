from __future__ import annotations

import json
import platform
from dataclasses import asdict, dataclass
from pathlib import Path

from planner.report import StrategyReport
from planner.tvm.toolchain import Toolchain
from workers import sandbox
from workers.boards.config import BoardConfig
from workers.sandboxed_compile import BoardOptions, CompileJob, SandboxedCompile

__all__ = ["BoardOptions", "BoardRunner", "CompileJob", "Health", "UnknownBoard"]


class UnknownBoard(LookupError):
    pass


@dataclass(frozen=True)
class Health:
    """Whether the board can run models now, and if not, why (shown on the boards page)."""

    online: bool
    reason: str = ""

    def to_json(self) -> dict:
        return {"status": "online" if self.online else "offline", "reason": self.reason}


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
        """What, besides the model and strategy, decides the figures: part of the cache key.
        The target, and the options the board adds to its compiles where it adds any (the
        CPU board adds none, and bisection looks its Results up by the target alone)."""
        options = self.compile_options(None)
        if options == BoardOptions():
            return self.target
        return f"{self.target}|{self.kind}|{json.dumps(asdict(options), sort_keys=True)}"

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

    def compile_options(self, job: CompileJob) -> BoardOptions:
        """What this board adds to its compile jobs (checks and measures on the host)."""
        return BoardOptions()

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
        moe: str = "dense",
    ) -> list[StrategyReport]:
        """One report per strategy and shape point, point by point."""
        job = CompileJob(
            model_name=model_name, source=source, params=params, strategies=list(strategies),
            artifacts_dir=Path(artifacts_dir), repeat=repeat, tree=tree, pipeline=pipeline,
            toolchain=toolchain, shapes=shapes, moe=moe,
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
        processes, every hand-over checked (:class:`SandboxedCompile`)."""
        return SandboxedCompile(self.target, self.limits, self.compile_options(job)).run(job)
