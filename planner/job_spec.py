"""What a worker asks of a sandboxed compile child, as one typed record.

A worker's compile runs ``python -m planner.tvm.job`` twice (the import phase, then the
compile phase; see :mod:`planner.tvm.job`). This is the job file both read: written by the
worker with :meth:`JobSpec.to_json`, read back by the child with :meth:`JobSpec.from_json`,
which refuses an unknown key or a wrong type, so that an option misspelt on one side fails
loudly instead of being dropped on the other. :class:`planner.report.StrategyReport` is the
record for the way back.

Plain Python: no TVM here, so the workers can build a job without importing the compiler.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

PHASES = ("", "import", "compile")


#: How a job computes a model's mixtures of experts (see
#: :mod:`planner.tvm.sources.experts`): every expert on every token, or grouped as a
#: grouped-GEMM deployment runs them.
MOE_FORMS = ("dense", "grouped")


class JobSpecError(ValueError):
    """A job file that is not a job: an unknown key, a missing one, or a wrong type."""


@dataclass(frozen=True)
class MicroOptions:
    """A micro board's job: export the plan as bare-metal C, build it and run it emulated."""

    board: str | None = None
    machine: str | None = None
    sram_bytes: int | None = None
    flash_bytes: int | None = None


@dataclass(frozen=True)
class CudaOptions:
    """A CUDA board's job.

    ``arch`` is what every kernel is built for (``sm_90``): named by the board, never read
    off whatever GPU the compiling host has, so a compile does the same work on a host
    with no GPU, a busy one or another one.
    """

    arch: str
    #: Count the device bytes of each build's inference (:mod:`planner.tvm.measure.cuda_memory`).
    measure_memory: bool = True

    def __post_init__(self) -> None:
        if not valid_arch(self.arch):
            raise JobSpecError(f"cuda arch {self.arch!r} is not of the form sm_XY (sm_90, sm_90a)")


def valid_arch(arch: object) -> bool:
    """``sm_`` and a compute capability of two or three digits, with an optional letter."""
    if not isinstance(arch, str) or not arch.startswith("sm_"):
        return False
    digits = arch[3:].rstrip("af")
    return digits.isdigit() and 2 <= len(digits) <= 3 and len(arch[3:]) - len(digits) <= 1


@dataclass(frozen=True)
class JobSpec:
    """One model of a run, for one sandboxed child."""

    model: str
    source: str
    strategies: tuple[str, ...]
    #: ``import``: run the repository's code and hand over the model; ``compile``: plan,
    #: build, check and measure what was handed over; empty: both in one process.
    phase: str = ""
    params: dict = field(default_factory=dict)
    #: How its mixtures of experts are computed: ``dense`` or ``grouped``.
    moe: str = "dense"
    target: str = "llvm"
    #: The toolchain spec the reports name (empty: the worker's own TVM).
    toolchain: str = ""
    #: The model's shape axis (``ShapeAxis.to_json()``); None without one.
    shapes: dict | None = None
    seed: int = 0
    # Import phase.
    #: Where the import hands over the model it built.
    out: str | None = None
    #: The commit's checkout, where model files, the pipeline and planners are found.
    base_dir: str | None = None
    pipeline: str = ""
    planner_time_limit: float | None = None
    lift_temporaries: bool | None = None
    # Compile phase.
    #: The folder the import phase handed over, copied by the worker.
    imported: str | None = None
    artifacts_dir: str | None = None
    repeat: int = 5
    check_locally: bool = True
    #: The host allocators measured (``planner.tvm.measure.memory``); None: all of them.
    memory_configs: tuple[str, ...] | None = None
    micro: MicroOptions | None = None
    cuda: CudaOptions | None = None

    def __post_init__(self) -> None:
        if self.phase not in PHASES:
            raise JobSpecError(f"unknown phase {self.phase!r}")
        if self.moe not in MOE_FORMS:
            raise JobSpecError(f"unknown form of mixture of experts {self.moe!r}")
        if not self.strategies:
            raise JobSpecError("a job names at least one strategy")

    def to_json(self) -> dict:
        data = dataclasses.asdict(self)
        data["strategies"] = list(self.strategies)
        if self.memory_configs is not None:
            data["memory_configs"] = list(self.memory_configs)
        return data

    @classmethod
    def from_json(cls, data: object) -> JobSpec:
        if not isinstance(data, dict):
            raise JobSpecError("a job is a JSON object")
        known = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise JobSpecError(f"unknown job keys: {', '.join(map(str, unknown))}")
        values: dict[str, Any] = dict(data)
        for name in ("model", "source", "strategies"):
            if name not in values:
                raise JobSpecError(f"the job has no {name!r}")
        for name in ("strategies", "memory_configs"):
            if values.get(name) is not None:
                values[name] = tuple(_typed(name, values[name], list))
        for name, nested in (("micro", MicroOptions), ("cuda", CudaOptions)):
            if values.get(name) is not None:
                values[name] = _nested(nested, name, values[name])
        for name, value in values.items():
            _check_type(name, value, known[name].type)
        return cls(**values)

    def replace(self, **changes) -> JobSpec:
        return dataclasses.replace(self, **changes)


def _nested(cls, name: str, value: object):
    if not isinstance(value, dict):
        raise JobSpecError(f"{name} is an object")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(value) - set(fields))
    if unknown:
        raise JobSpecError(f"unknown {name} keys: {', '.join(map(str, unknown))}")
    for key, item in value.items():
        _check_type(f"{name}.{key}", item, fields[key].type)
    try:
        return cls(**value)
    except TypeError as exc:
        raise JobSpecError(f"{name}: {exc}") from None


#: The annotation of each field (a string, under ``from __future__ import annotations``) as
#: the JSON types it admits.
_TYPES = {
    "str": (str,),
    "int": (int,),
    "float": (int, float),
    "bool": (bool,),
    "dict": (dict,),
}


def _check_type(name: str, value: object, annotation: str) -> None:
    if isinstance(value, (MicroOptions, CudaOptions)):
        return
    options = [part.strip() for part in str(annotation).split("|")]
    if value is None:
        if "None" in options:
            return
        raise JobSpecError(f"{name} may not be null")
    for option in options:
        base = option.split("[", 1)[0]
        if base == "tuple" and isinstance(value, tuple):
            _typed(name, value, tuple)
            return
        admitted = _TYPES.get(base)
        if admitted and isinstance(value, admitted):
            # bool is an int in Python; a count given as true is still a mistake.
            if isinstance(value, bool) and bool not in admitted:
                continue
            return
    raise JobSpecError(f"{name} is {type(value).__name__}, not {annotation}")


def _typed(name: str, value: object, kind: type) -> list[str]:
    if not isinstance(value, kind) or not all(isinstance(v, str) for v in value):
        raise JobSpecError(f"{name} is a list of strings")
    return list(value)
