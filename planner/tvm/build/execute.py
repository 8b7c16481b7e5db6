"""Build lowered modules, run them on the same inputs, and time them fairly."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import tvm
from tvm import relax

from planner.tvm.build.kernels import KernelLibraries


@dataclass
class Latency:
    median_ms: float
    p90_ms: float
    samples_ms: list[float]

    def to_json(self) -> dict:
        return {"median": self.median_ms, "p90": self.p90_ms, "samples": self.samples_ms}


def build(
    mod: tvm.IRModule, target: tvm.target.Target, libraries: KernelLibraries | None = None
) -> relax.VMExecutable:
    """Build an already lowered module; ``libraries`` shares kernels between the builds of
    one model (:mod:`planner.tvm.build.kernels`), a fresh one builds them all."""
    if target.kind.name == "cuda":
        from planner.tvm.build import cuda

        # Kernels for the target's architecture, never the one of whatever GPU is here.
        cuda.install_compile_callback(cuda.arch_of(target))
    # The module is already lowered by us; TVM must not run its pipeline (and its planner).
    with target:
        return (libraries if libraries is not None else KernelLibraries()).build(mod, target)


def device_for(target: tvm.target.Target) -> tvm.runtime.Device:
    kind = target.kind.name
    # Code generators name the device they compile for by another name.
    return tvm.device({"llvm": "cpu", "c": "cpu"}.get(kind, kind), 0)


def load(executable: relax.VMExecutable, dev: tvm.runtime.Device) -> relax.VirtualMachine:
    # Each VirtualMachine JIT-links the module again (about a second for a CNN): make one
    # per build and reuse it for checking and timing.
    return relax.VirtualMachine(executable, dev)


def run_once(
    vm: relax.VirtualMachine,
    dev: tvm.runtime.Device,
    inputs: list[np.ndarray],
    entry: str = "forward",
) -> list[np.ndarray]:
    args = [tvm.runtime.tensor(value, dev) for value in inputs]
    return _to_numpy(vm[entry](*args))


def _to_numpy(value) -> list[np.ndarray]:
    if isinstance(value, tvm.runtime.Tensor):
        return [value.numpy()]
    return [item for element in value for item in _to_numpy(element)]


def compare_outputs(
    expected: list[np.ndarray], actual: list[np.ndarray], *, rtol: float, atol: float
) -> tuple[bool, float]:
    """Whether ``actual`` matches ``expected`` within tolerance, and the largest difference."""
    if len(expected) != len(actual):
        return False, float("inf")
    worst = 0.0
    match = True
    for want, got in zip(expected, actual, strict=True):
        if want.shape != got.shape:
            return False, float("inf")
        wide_want, wide_got = want.astype(np.float64), got.astype(np.float64)
        diff = np.abs(wide_want - wide_got)
        # NaN on either side is a NaN difference and no match: two builds that both
        # return NaN agree on nothing that could be checked.
        worst = max(worst, float(diff.max()) if diff.size else 0.0, key=_nan_first)
        # In float64: bfloat16 or float8 arithmetic would round the test itself.
        low = low_precision_rtol(want.dtype)
        match = match and bool(
            np.allclose(wide_got, wide_want, rtol=max(rtol, low), atol=atol)
        )
    return match, worst


def low_precision_rtol(dtype: np.dtype) -> float:
    """The relative tolerance one rounding step of ``dtype`` needs where it is a float type
    narrower than float16 (bfloat16: 2**-7; the float8 types more), else 0: two correct
    computations in such a type can differ by a unit in the last place, which float32's
    tolerance would call a wrong build."""
    if dtype.kind != "V":  # ml_dtypes' types; numpy's own floats have kind "f"
        return 0.0
    import ml_dtypes

    try:
        return 2 * float(ml_dtypes.finfo(dtype).eps)
    except (TypeError, ValueError):
        return 0.0


def _nan_first(value: float) -> float:
    return float("inf") if np.isnan(value) else value


def describe_diff(value: float) -> str:
    """A difference as a message says it: NaN as NaN, never as a number."""
    return "NaN" if np.isnan(value) else f"{value:.3g}"


def non_finite(outputs: list[np.ndarray]) -> str:
    """"NaN" or "infinity" where a float output holds one, else ""."""
    for value in outputs:
        if value.dtype.kind in "fc":
            if np.isnan(value).any():
                return "NaN"
            if np.isinf(value).any():
                return "infinity"
    return ""


def interleaved_latency(
    vms: dict[str, relax.VirtualMachine],
    dev: tvm.runtime.Device,
    inputs: list[np.ndarray],
    *,
    repeat: int,
    warmup: int = 1,
    entry: str = "forward",
) -> dict[str, Latency]:
    """Time every executable in turn, round after round.

    Run-to-run noise on a shared CPU is 10-40%; timing one build after another would put a
    slow phase of the machine on one strategy only, so the samples are taken in rounds that
    time each build in turn. Every call of TVM's time evaluator first runs the function
    once untimed, so that each sample follows a run of the same build: two rounds of
    several samples pay for that run twice per build, where a round per sample paid for it
    once per sample (half of all the runs).
    """
    rounds = [len(part) for part in np.array_split(range(repeat), min(repeat, ROUNDS))]
    evaluators: dict[str, dict[int, Callable]] = {}
    for name, vm in vms.items():
        args = [tvm.runtime.tensor(v, dev) for v in inputs]
        vm.save_function(entry, f"{entry}_timed", *args)
        evaluators[name] = {
            size: vm.time_evaluator(f"{entry}_timed", dev, number=1, repeat=size)
            for size in set(rounds)
        }
        for _ in range(warmup):
            vm[f"{entry}_timed"]()
    samples: dict[str, list[float]] = {name: [] for name in vms}
    for size in rounds:
        for name, sized in evaluators.items():
            samples[name].extend(seconds * 1e3 for seconds in sized[size]().results)
    return {name: _summarise(values) for name, values in samples.items()}


#: How many rounds :func:`interleaved_latency` takes its samples in.
ROUNDS = 2


@dataclass
class Check:
    """How one build fared against the reference build, and how fast it ran."""

    outputs_match: bool | None = None
    max_abs_diff: float | None = None
    error: str | None = None
    latency: Latency | None = None

    def report_fields(self) -> dict:
        """What to write into a strategy's report; an absent error or timing leaves the
        report's own (an earlier error, say) in place."""
        fields = {"outputs_match": self.outputs_match, "max_abs_diff": self.max_abs_diff}
        if self.error:
            fields["error"] = self.error
        if self.latency is not None:
            fields["latency_ms"] = self.latency.to_json()
        return fields


def check_and_time(
    loaders: dict[str, Callable[[], relax.VirtualMachine]],
    dev: tvm.runtime.Device,
    inputs: list[np.ndarray],
    *,
    reference: str,
    entry: str,
    repeat: int,
    rtol: float,
    atol: float,
    where: str = "",
    more_inputs: Sequence[list[np.ndarray]] = (),
    judge_reference: Callable[[list[list[np.ndarray]]], str] | None = None,
    before_timing: Callable[[], None] | None = None,
    later: Callable[[], dict[str, Callable[[], relax.VirtualMachine]]] | None = None,
) -> dict[str, Check]:
    """Run every build, compare it with ``reference``'s outputs, time those that match.

    Each build runs on ``inputs`` and on each of ``more_inputs``; it matches only if it
    matches on all of them, and it is timed on ``inputs``. ``loaders`` make each build's VM
    (locally, or on a remote device); ``where`` names the device in error messages. A build
    that fails, or whose outputs differ, is not timed.

    ``judge_reference`` gets the reference's outputs for each draw and says what is wrong
    with them ("" where nothing is): then every build fails with that, unchecked and
    untimed, since nothing can be checked against a wrong reference. ``later`` gives more
    loaders once ``loaders`` are checked (builds still being made meanwhile); they are
    checked next and timed with the others. ``before_timing`` runs between the checks and
    the timing (to finish work that would disturb it).
    """
    checks = {name: Check() for name in loaders}
    vms: dict[str, relax.VirtualMachine] = {}
    draws = [inputs, *more_inputs]
    expected: list | None = None
    group = dict(loaders)
    while group:
        # The reference runs first: everything else is checked against its outputs.
        for name in sorted(group, key=lambda n: n != reference):
            check = checks[name]
            try:
                vm = group[name]()
                outputs = [run_once(vm, dev, draw, entry) for draw in draws]
            except Exception as exc:  # a broken build is a failed result, not a lost run
                check.error = f"check failed: run failed{where}: {type(exc).__name__}: {exc}"
                continue
            if name == reference:
                wrong = judge_reference(outputs) if judge_reference is not None else ""
                if wrong:
                    if later is not None:
                        checks.update({n: Check() for n in later()})
                    for other in checks.values():
                        other.error = f"check failed: {wrong}"
                    check.outputs_match = False
                    return checks
                expected = outputs
            if expected is None:
                check.error = (
                    f"check failed: the {reference} build failed{where}, so there is nothing "
                    "to check against"
                )
                continue
            compared = [
                compare_outputs(want, got, rtol=rtol, atol=atol)
                for want, got in zip(expected, outputs, strict=True)
            ]
            check.outputs_match = all(match for match, _ in compared)
            worst = max((diff for _, diff in compared), key=_nan_first)
            # A report carries finite figures only; a NaN difference is said in the error.
            check.max_abs_diff = None if np.isnan(worst) else worst
            if not check.outputs_match:
                check.error = (
                    # Named like every other step's failure (planner.tvm.steps).
                    f"check failed: outputs{where} differ from the {reference} build: max abs "
                    f"diff {describe_diff(worst)} (rtol {rtol}, atol {atol})"
                )
                continue
            vms[name] = vm
        group = later() if later is not None else {}
        later = None
        checks.update({name: Check() for name in group})
    if before_timing is not None:
        before_timing()
    if repeat > 0 and vms:
        # Every VM timed has just run the check on these inputs: that was its warm-up.
        for name, latency in interleaved_latency(
            vms, dev, inputs, repeat=repeat, warmup=0, entry=entry
        ).items():
            checks[name].latency = latency
    return checks


def _summarise(values: list[float]) -> Latency:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(round(0.9 * (len(ordered) - 1))))]
    return Latency(statistics.median(ordered), p90, values)
