"""Build lowered modules, run them on the same inputs, and time them fairly."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import numpy as np
import tvm
from tvm import relax


@dataclass
class Latency:
    median_ms: float
    p90_ms: float
    samples_ms: list[float]

    def to_json(self) -> dict:
        return {"median": self.median_ms, "p90": self.p90_ms, "samples": self.samples_ms}


def build(mod: tvm.IRModule, target: tvm.target.Target) -> relax.VMExecutable:
    # The module is already lowered by us; TVM must not run its pipeline (and its planner).
    return relax.build(mod, target, relax_pipeline=None)


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
        diff = np.abs(want.astype(np.float64) - got.astype(np.float64))
        worst = max(worst, float(np.nanmax(diff)) if diff.size else 0.0)
        match = match and bool(np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True))
    return match, worst


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
    slow phase of the machine on one strategy only, so each round times each build once.
    """
    evaluators = {}
    for name, vm in vms.items():
        args = [tvm.runtime.tensor(v, dev) for v in inputs]
        vm.save_function(entry, f"{entry}_timed", *args)
        evaluators[name] = vm.time_evaluator(f"{entry}_timed", dev, number=1, repeat=1)
        for _ in range(warmup):
            evaluators[name]()
    samples: dict[str, list[float]] = {name: [] for name in vms}
    for _ in range(repeat):
        for name, evaluate in evaluators.items():
            samples[name].append(evaluate().mean * 1e3)
    return {name: _summarise(values) for name, values in samples.items()}


def _summarise(values: list[float]) -> Latency:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(round(0.9 * (len(ordered) - 1))))]
    return Latency(statistics.median(ordered), p90, values)
