"""Compile torchvision's classification networks (random weights) under every strategy.

    python benchmarks/torchvision_models.py                       # the set below, 64x64
    python benchmarks/torchvision_models.py densenet121 googlenet # some of them
    python benchmarks/torchvision_models.py timm:ghostnet_100     # a timm model (timm:NAME)
    python benchmarks/torchvision_models.py --strategy tvm-stock --strategy best-fit+rewrites
    python benchmarks/torchvision_models.py --image 96 --json out.json

These are networks nobody here wrote: every rule in the TVM wing must hold on them. One
table: planned bytes, measured peak, latency, outputs_match and the rewrites applied per
model and strategy, then every failure with its error. Exit status 1 if any strategy failed
or differed from tvm-stock.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import time
from pathlib import Path

# Run as a script, this folder comes first on sys.path, and benchmarks/planner.py would
# shadow the planner package.
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.tvm.compile import compile_model, strategy_names  # noqa: E402
from planner.tvm.zoo import ModelSource  # noqa: E402

MODELS = [
    "resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "shufflenet_v2_x0_5",
    "squeezenet1_0", "densenet121", "googlenet", "inception_v3", "efficientnet_b0",
    "regnet_y_400mf", "mnasnet0_5", "vit_b_16",
    # timm's architectures that torchvision lacks: GhostNet's blocks concatenate two halves
    # and keep the first k channels; HRNet fuses branches at 4 resolutions (upsample + add).
    "timm:ghostnet_100", "timm:hrnet_w18_small",
]
#: Sizes where 64x64 does not apply: Inception's stem needs 75, and a ViT-B/16 at 64 has
#: 16 patches, which keeps its attention small enough to compile quickly.
IMAGE = {"inception_v3": 75}
#: Every strategy whose plan differs in kind; the other library heuristics land between
#: these (``--strategy all`` runs every registered one).
DEFAULT_STRATEGIES = ["tvm-stock", "greedy-by-size", "best-fit", "best-fit+rewrites"]


def _int(value) -> str:
    return "-" if value is None else f"{value:,}"


def _rewrites(report) -> str:
    found = report.rewrites or {}
    if not found:
        return ""
    parts = [f"inplace={len(found.get('inplace', []))}", f"concat={len(found.get('concat', []))}"]
    if found.get("skipped"):
        parts.append(f"skipped={len(found['skipped'])}")
    if found.get("rejected"):
        parts.append("rejected")
    return " ".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=MODELS)
    parser.add_argument("--strategy", action="append", default=None)
    parser.add_argument("--image", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    strategies = args.strategy or DEFAULT_STRATEGIES
    if "all" in strategies:
        strategies = strategy_names()

    header = ("model", "strategy", "planned B", "vs stock", "measured peak B", "vs stock",
              "latency ms", "match", "rewrites")
    rows, failures, everything = [header], [], []
    # A run stopped early (Ctrl-C or kill) still prints the table of the models it finished;
    # --json is rewritten after each model.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        _run(args, strategies, rows, failures, everything)
    except KeyboardInterrupt:
        failures.append(("(run)", "(rest)", "interrupted: the models after the last row not run"))

    widths = [max(len(str(row[i])) for row in rows) for i in range(len(header))]
    for row in rows:
        print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)))
    if failures:
        print("\nFailures:")
        for model, strategy, error in failures:
            print(f"- {model} / {strategy}: {error}")
    return 1 if failures else 0


def _run(args, strategies, rows, failures, everything) -> None:
    for name in args.models:
        image = max(args.image, IMAGE.get(name, 0))
        kind = "timm" if name.startswith("timm:") else "torchvision"
        source = ModelSource(f"{kind}:{name.removeprefix('timm:')}", {"image": image})
        started = time.perf_counter()
        try:
            reports = compile_model(source, strategies, repeat=args.repeat)
        except Exception as exc:  # a model that does not import is a finding, not a crash
            failures.append((name, "(all)", f"{type(exc).__name__}: {exc}"))
            continue
        seconds = time.perf_counter() - started
        stock = next((r for r in reports if r.strategy == "tvm-stock"), None)
        for report in reports:
            everything.append(report.to_json())
            if not report.ok:
                failures.append((name, report.strategy, report.error))
            rows.append((
                f"{name} ({image}px)",
                report.strategy,
                _int(report.planned_bytes),
                _ratio(report.planned_bytes, stock and stock.planned_bytes),
                _int(report.measured_peak_bytes),
                _ratio(report.measured_peak_bytes, stock and stock.measured_peak_bytes),
                f"{(report.latency_ms or {}).get('median', float('nan')):.2f}",
                {True: "yes", False: "NO", None: "-"}[report.outputs_match],
                _rewrites(report),
            ))
        print(f"# {name}: {seconds:.0f} s", file=sys.stderr, flush=True)
        if args.json:
            args.json.write_text(json.dumps(everything, indent=1))


def _ratio(value, reference) -> str:
    if not value or not reference:
        return "-"
    return f"{value / reference:.3f}"


if __name__ == "__main__":
    sys.exit(main())
