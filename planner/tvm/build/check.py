"""Every build checked against TVM's stock build on the same draws, the stock build against
the framework the model came from, and each distinct build timed."""

from __future__ import annotations

import logging

import numpy as np

from planner.report import ATOL, RTOL
from planner.tvm.build import execute
from planner.tvm.build.planned import Build
from planner.tvm.strategies import STOCK

log = logging.getLogger(__name__)


#: TVM's kernels and PyTorch's differ in float rounding (reduction order, fused
#: multiply-adds), unlike two TVM builds of the same kernels; a wrong build is off by the
#: size of the activations.
REFERENCE_RTOL = 1e-3


REFERENCE_ATOL = 1e-4


def judge_reference(network, builds: dict[str, Build], draws):
    """What is wrong with TVM's stock build's outputs on ``draws`` (see
    :func:`execute.check_and_time`): a value that is not finite, or a difference from the
    framework the model was exported from beyond the tolerance. Every report records what
    the reference was checked against and by how much."""
    framework = network.framework

    def record(check: str, diff: float | None = None) -> None:
        for build in builds.values():
            build.report.reference_check = check
            build.report.reference_max_abs_diff = diff

    def judge(outputs) -> str:
        bad = next(filter(None, map(execute.non_finite, outputs)), "")
        if bad:
            record(f"refused: TVM's build returns {bad}")
            return f"TVM's build of this model returns {bad}"
        if framework is None:
            record("not checked: the model was not exported from a framework here")
            return ""
        if framework.run is None:
            record(f"not checked: {framework.missing}")
            return ""
        try:
            expected = [framework.run(list(draw)) for draw in draws]
        except Exception as exc:  # the framework failing is no verdict on TVM's build
            log.warning("%s did not run %s: %s", framework.name, network.name, exc)
            record(f"not checked: {framework.name} failed: {type(exc).__name__}: {exc}"[:500])
            return ""
        unlike = next(filter(None, map(_unlike, expected, outputs)), "")
        if unlike:
            # Outputs handed over by a sandboxed process are the likeliest source, but a
            # framework run here is refused alike: no difference says what to compare.
            record(f"refused: {framework.name} returns {unlike}")
            return (
                f"{framework.name}'s outputs are not shaped as TVM's build's: {unlike}, so "
                "there is nothing to check against"
            )
        bad = next(filter(None, map(execute.non_finite, expected)), "")
        if bad:
            record(f"refused: {framework.name} returns {bad}")
            return f"{framework.name}'s own outputs hold {bad}: there is nothing to check against"
        compared = [
            execute.compare_outputs(want, got, rtol=REFERENCE_RTOL, atol=REFERENCE_ATOL)
            for want, got in zip(expected, outputs, strict=True)
        ]
        worst = max(diff for _, diff in compared)
        if framework.after_pipeline and np.isfinite(worst):
            # The repository's pipeline may change the numbers on purpose: said, not refused.
            record(f"{framework.name}, after the repository's pipeline", worst)
            return ""
        record(framework.name, worst if np.isfinite(worst) else None)
        if all(match for match, _ in compared):
            return ""
        # The output's own scale says whether the difference is float rounding in large
        # values or a wrong operator: 4e-4 on logits of 37 is not 4e-4 on logits of 1.
        scale = max(
            (float(np.abs(w.astype(np.float64)).max()) for draw in expected for w in draw
             if w.size and w.dtype.kind in "fc"),
            default=0.0,
        )
        return (
            f"TVM's build of this model differs from {framework.name} by "
            f"{execute.describe_diff(worst)} (rtol {REFERENCE_RTOL}, atol {REFERENCE_ATOL}; "
            f"its outputs reach {scale:.3g})"
        )

    return judge


def _unlike(expected: list[np.ndarray], outputs: list[np.ndarray]) -> str:
    """How the framework's outputs of one draw differ in count, shape or dtype from TVM's
    build's ("" where they agree)."""
    if len(expected) != len(outputs):
        return f"{len(expected)} outputs where TVM's build returns {len(outputs)}"
    for index, (want, got) in enumerate(zip(expected, outputs, strict=True)):
        if want.shape != got.shape or want.dtype != got.dtype:
            return (
                f"output {index} as {want.dtype}{list(want.shape)} where TVM's build returns "
                f"{got.dtype}{list(got.shape)}"
            )
    return ""


def check_and_time_builds(
    network, builds: dict[str, Build], target, repeat: int, inputs, *more_inputs,
    loader=None, settle=None, later=None,
) -> None:
    """Run, check and time each distinct build once: strategies whose plans came out the
    same share one executable (:class:`planner.tvm.build.kernels.KernelLibraries`), and so its
    check and its latency samples. ``loader(build, dev)`` makes a build's VM (default: from
    its executable, JIT-compiling its kernels once per library); ``settle()`` runs before
    the timing, which needs the machine to itself. ``later()`` gives the builds still being
    made: ``builds`` are checked meanwhile, those next, and all are timed together."""
    load = loader or (lambda build, dev: execute.load(build.executable, dev))
    dev = execute.device_for(target)
    first: dict[int, str] = {}
    every = dict(builds)

    def loaders(group: dict[str, Build]) -> dict:
        every.update(group)
        made = {}
        runnable = {s: b for s, b in group.items() if b.report.ok}
        for strategy, build in sorted(runnable.items(), key=lambda item: item[0] != STOCK):
            if id(build.executable) not in first:
                first[id(build.executable)] = strategy
                made[strategy] = lambda b=build: load(b, dev)
        return made

    checks = execute.check_and_time(
        loaders(builds),
        dev,
        inputs,
        reference=STOCK,
        entry=network.entry,
        repeat=repeat,
        rtol=RTOL,
        atol=ATOL,
        more_inputs=more_inputs,
        judge_reference=judge_reference(network, every, [inputs, *more_inputs]),
        before_timing=settle,
        later=(lambda: loaders(later())) if later is not None else None,
    )
    if later is not None:
        every.update(later())
    reference = every.get(STOCK)
    for build in every.values():
        if reference is not None:
            # Judged before the builds that came later were there.
            build.report.reference_check = reference.report.reference_check
            build.report.reference_max_abs_diff = reference.report.reference_max_abs_diff
        if build.report.ok:
            check = checks[first[id(build.executable)]]
            for key, value in check.report_fields().items():
                setattr(build.report, key, value)
