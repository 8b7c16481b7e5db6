"""Compile torchvision's classification networks (random weights) under every strategy.

    python benchmarks/torchvision_models.py                       # the set below, 64x64
    python benchmarks/torchvision_models.py densenet121 googlenet # some of them
    python benchmarks/torchvision_models.py timm:ghostnet_100     # a timm model (timm:NAME)
    python benchmarks/torchvision_models.py --strategy tvm-stock --strategy best-fit+rewrites
    python benchmarks/torchvision_models.py --image 96 --json out.json
    python benchmarks/torchvision_models.py --from-json a.json b.json --markdown  # no compiling

    # What tests/tvm/sources/test_real_architectures.py checked on timm's networks before they moved
    # here (minutes on two cores): both build and match with +rewrites, none skipped whole,
    # and best-fit+rewrites plans fewer bytes than tvm-stock ("vs stock" below 1).
    python benchmarks/torchvision_models.py timm:ghostnet_050 timm:hrnet_w18_small --image 32 \\
        --strategy tvm-stock --strategy best-fit+rewrites --repeat 0

These are networks nobody here wrote: every rule in the TVM wing must hold on them. One
table: planned bytes, measured peak, latency, outputs_match and the rewrites applied per
model and strategy, then every failure with its error. Exit status 1 if any strategy failed
or differed from tvm-stock. ``--markdown`` prints instead one row per model, each strategy's
planned bytes as a ratio to tvm-stock's (the table in docs/benchmarks.md); ``--from-json``
reads reports that earlier runs saved with ``--json`` instead of compiling, so runs of a few
models each make one table.
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
from planner.tvm.sources import ModelSource  # noqa: E402

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
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--from-json", type=Path, nargs="+", default=None, metavar="JSON")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    if args.from_json:
        saved = [report for path in args.from_json for report in json.loads(path.read_text())]
        print(markdown_table(saved))
        failed = [r for r in saved if r.get("error") or r.get("outputs_match") is False]
        return 1 if failed else 0
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

    if args.markdown:
        print(markdown_table(everything))
    else:
        widths = [max(len(str(row[i])) for row in rows) for i in range(len(header))]
        for row in rows:
            print("  ".join(str(c).ljust(width) for c, width in zip(row, widths, strict=True)))
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
            elif any(s.get("rewrite") == "all" for s in (report.rewrites or {}).get(
                    "skipped", [])):
                failures.append((name, report.strategy, "every rewrite was skipped"))
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


def markdown_table(reports: list[dict]) -> str:
    """One row per model: tvm-stock's planned bytes, every other strategy's as a ratio to
    them, best-fit+rewrites' measured peak as a ratio to tvm-stock's, how many builds
    matched tvm-stock's outputs, what best-fit+rewrites rewrote, and
    the lower bound under program order and under the order +reorder chose."""
    by_model: dict[str, dict[str, dict]] = {}
    for report in reports:
        by_model.setdefault(report["model_source"], {})[report["strategy"]] = report
    strategies = [name for name in strategy_names() if name != "tvm-stock"]
    strategies = [s for s in strategies if any(s in runs for runs in by_model.values())]
    lines = [
        "| model | tvm-stock planned B | " + " | ".join(strategies)
        + " | +rewrites measured peak | outputs match | best-fit+rewrites"
        " | order bound: program / chosen |",
        "|---|---:|" + "---:|" * (len(strategies) + 1) + "---|---|---|",
    ]
    for model, runs in by_model.items():
        stock = runs.get("tvm-stock", {}).get("planned_bytes")
        ratios = [
            "failed" if runs[s].get("error") else _ratio(runs[s].get("planned_bytes"), stock)
            if s in runs else ""
            for s in strategies
        ]
        matched = sum(bool(r.get("outputs_match")) for r in runs.values())
        rewrites = runs.get("best-fit+rewrites", {}).get("rewrites") or {}
        rewritten = (
            f"in-place {len(rewrites.get('inplace', []))}, "
            f"concat copies removed {rewrites.get('concat_copies_removed', 0)}"
            + (f", skipped {len(rewrites['skipped'])}" if rewrites.get("skipped") else "")
            if rewrites else ""
        )
        measured = _ratio(
            runs.get("best-fit+rewrites", {}).get("measured_peak_bytes"),
            runs.get("tvm-stock", {}).get("measured_peak_bytes"),
        )
        ordered = runs.get("best-fit+reorder", {})
        bounds = (
            f"{_int(ordered.get('program_order_lower_bound_bytes'))} / "
            f"{_int(ordered.get('chosen_order_lower_bound_bytes'))}"
            if ordered else ""
        )
        lines.append(
            f"| {model.partition(':')[2] or model} | {_int(stock)} | " + " | ".join(ratios)
            + f" | {measured} | {matched} of {len(runs)} | {rewritten} | {bounds} |"
        )
    return "\n".join(lines)


def _ratio(value, reference) -> str:
    if not value or not reference:
        return "-"
    return f"{value / reference:.3f}"


if __name__ == "__main__":
    sys.exit(main())
