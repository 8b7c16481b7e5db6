"""Plan the zoo's networks at their real sizes and print what each strategy needs.

    python benchmarks/zoo.py                    # every model below
    python benchmarks/zoo.py resnet18 bert_tiny # some of them
    python benchmarks/zoo.py --list

One ``compile_model`` run per model with ``repeat=1``: benchmark-level numbers, too slow and
too machine-dependent for the test suite.
"""

from __future__ import annotations

import argparse
import inspect
import logging
import sys
import time
from pathlib import Path

# Run as a script, this folder comes first on sys.path, and benchmarks/planner.py would
# shadow the planner package.
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.tvm.compile import compile_model  # noqa: E402
from planner.tvm.sources import ModelSource  # noqa: E402

STRATEGIES = ["tvm-stock", "none", "greedy-by-size"]

# Real sizes. DenseNet and U-Net run at their zoo defaults (a DenseNet-BC with blocks of
# 4, 4, 4 and growth 12; a quarter-width U-Net at 64x64); their full-size variants are here
# too but not in the default set, because untuned CPU kernels make them take many minutes.
MODELS: dict[str, ModelSource] = {
    "resnet18": ModelSource("zoo:resnet18", {"resolution": 224, "width": 1.0}),
    "mobilenet_v2": ModelSource("zoo:mobilenet_v2", {"resolution": 224, "width": 1.0}),
    "densenet": ModelSource("zoo:densenet"),
    "unet": ModelSource("zoo:unet"),
    "bert_tiny": ModelSource("zoo:bert_tiny", {"seq": 128}),
    "mlp": ModelSource("zoo:mlp"),
}
EXTRA: dict[str, ModelSource] = {
    "densenet121": ModelSource(
        "zoo:densenet", {"resolution": 224, "growth": 32, "blocks": [6, 12, 24, 16]}
    ),
    "unet_full": ModelSource("zoo:unet", {"resolution": 256, "width": 1.0}),
}

COLUMNS = (
    ("model", 13),
    ("strategy", 15),
    ("planned B", 12),
    ("interm. B", 12),
    ("lower bd B", 12),
    ("vs stock", 9),
    ("match", 6),
    ("compile s", 10),
    ("latency ms", 11),
)


def run(name: str, source: ModelSource, measure_memory: bool) -> list[list[str]]:
    extra = {}
    if not measure_memory and "memory_configs" in inspect.signature(compile_model).parameters:
        extra["memory_configs"] = ()
    reports = compile_model(source, STRATEGIES, model_name=name, repeat=1, **extra)
    stock = next((r.planned_bytes for r in reports if r.strategy == "tvm-stock"), None)
    rows = []
    for report in reports:
        ratio = (
            f"{report.planned_bytes / stock:.3f}"
            if stock and report.planned_bytes is not None
            else "-"
        )
        latency = (report.latency_ms or {}).get("median")
        rows.append(
            [
                name,
                report.strategy,
                _number(report.planned_bytes),
                _number(report.intermediate_bytes),
                _number(report.lower_bound_bytes),
                ratio,
                str(report.outputs_match),
                f"{report.compile_seconds:.1f}" if report.compile_seconds is not None else "-",
                f"{latency:.1f}" if latency is not None else "-",
            ]
        )
        if report.error:
            print(f"# {name} / {report.strategy}: {report.error}", file=sys.stderr)
    return rows


def _number(value: int | None) -> str:
    return f"{value:,}" if value is not None else "-"


def _line(cells: list[str]) -> str:
    return "  ".join(
        cell.ljust(width) if i < 2 else cell.rjust(width)
        for i, (cell, (_, width)) in enumerate(zip(cells, COLUMNS, strict=True))
    )


def main(argv: list[str] | None = None) -> int:
    known = {**MODELS, **EXTRA}
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("models", nargs="*", help=f"default: {' '.join(MODELS)}")
    parser.add_argument("--list", action="store_true", help="list the models and exit")
    parser.add_argument(
        "--measure-memory", action="store_true", help="also measure each build in a process"
    )
    args = parser.parse_args(argv)
    if args.list:
        for name, source in known.items():
            print(f"{name:14} {source.describe()}")
        return 0
    unknown = [m for m in args.models if m not in known]
    if unknown:
        parser.error(f"unknown model {', '.join(unknown)}; known: {', '.join(known)}")

    logging.basicConfig(level=logging.WARNING)
    print(_line([title for title, _ in COLUMNS]), flush=True)
    started = time.perf_counter()
    for name in args.models or list(MODELS):
        for row in run(name, known[name], args.measure_memory):
            print(_line(row), flush=True)
    print(f"# {time.perf_counter() - started:.0f} s in all", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
