"""Check the TVM-integration targets on real-size models and print the figures.

    python benchmarks/tvm_targets.py [--repeat 5]

Each model is compiled once per configuration by ``planner.tvm.compile.compile_model``; all
builds of one model are timed in the same interleaved rounds, so latency ratios come from
one run. Figures are ratios to ``tvm-stock`` measured in that run.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

# Run as a script this folder comes first on sys.path, where planner.py would shadow the
# planner package.
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.tvm.compile import STOCK, compile_model  # noqa: E402
from planner.tvm.sources import ModelSource  # noqa: E402

RESNET18 = ModelSource("zoo:resnet18", {"resolution": 224, "width": 1.0})
DENSENET = ModelSource("zoo:densenet", {"classes": 10})


def _row(label: str, value: str, target: str, met: bool | None) -> str:
    mark = {True: "met", False: "NOT met", None: ""}[met]
    return f"| {label} | {value} | {target} | {mark} |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    rows = []

    # Intermediates only, as TVM's planner sees them (kernel temporaries left in the pool).
    plain = {r.strategy: r for r in compile_model(
        RESNET18, [STOCK, "greedy-by-size"], repeat=0, memory_configs=(),
        lift_temporaries=False)}
    stock, greedy = plain[STOCK], plain["greedy-by-size"]
    saving = 1 - greedy.intermediate_bytes / stock.intermediate_bytes
    rows.append(_row("ResNet-18 224: greedy-by-size intermediates vs lower bound",
                     f"{greedy.intermediate_bytes:,} vs {greedy.lower_bound_bytes:,}",
                     "equal", greedy.intermediate_bytes == greedy.lower_bound_bytes))
    rows.append(_row("ResNet-18 224: greedy-by-size intermediates vs tvm-stock",
                     f"{greedy.intermediate_bytes:,} vs {stock.intermediate_bytes:,} "
                     f"({-saving:+.1%})", ">= 15% less", saving >= 0.15))

    # Everything planned together, measured, and timed in interleaved rounds.
    full = {r.strategy: r for r in compile_model(
        RESNET18, [STOCK, "best-fit", "best-fit+rewrites"], repeat=args.repeat)}
    stock = full[STOCK]
    rows.append(_row("ResNet-18 224: kernel workspace held by TVM's pool vs intermediates "
                     "(tvm-stock, measured)",
                     f"{stock.kernel_workspace_bytes:,} vs {stock.intermediate_bytes:,}",
                     "about as large", None))
    for name in ("best-fit", "best-fit+rewrites"):
        r = full[name]
        held = 1 - r.measured_peak_bytes / stock.measured_peak_bytes
        slower = r.latency_ms["median"] / stock.latency_ms["median"] - 1
        # Only +rewrites plans the kernel temporaries in the arena; best-fit leaves them to
        # TVM's pool like the stock build, so the 35% target is not its to meet.
        unified = name.endswith("+rewrites")
        rows.append(_row(f"ResNet-18 224: {name} measured peak vs tvm-stock (pooled)",
                         f"{r.measured_peak_bytes:,} vs {stock.measured_peak_bytes:,} "
                         f"({-held:+.1%})", ">= 35% less" if unified else "(pool kept)",
                         held >= 0.35 if unified else None))
        rows.append(_row(f"ResNet-18 224: {name} median latency vs tvm-stock",
                         f"{r.latency_ms['median']:.1f} vs {stock.latency_ms['median']:.1f} ms "
                         f"({slower:+.1%})", "within 3%", abs(slower) <= 0.03))

    # Both of our strategies plan the same tensors here (kernel temporaries lifted), so the
    # plain plan's lower bound is the bound of exactly what the rewrites start from.
    dense = {r.strategy: r for r in compile_model(
        DENSENET, [STOCK, "best-fit", "best-fit+rewrites"], repeat=args.repeat,
        lift_temporaries=True)}
    stock, plain_bf, rewritten = dense[STOCK], dense["best-fit"], dense["best-fit+rewrites"]
    below = 1 - rewritten.measured_peak_bytes / stock.measured_peak_bytes
    rows.append(_row("DenseNet: best-fit+rewrites arena vs lower bound of the same tensors "
                     "without rewrites",
                     f"{rewritten.intermediate_bytes:,} vs {plain_bf.lower_bound_bytes:,}",
                     "below", rewritten.intermediate_bytes < plain_bf.lower_bound_bytes))
    rows.append(_row("DenseNet: best-fit+rewrites measured peak vs tvm-stock",
                     f"{rewritten.measured_peak_bytes:,} vs {stock.measured_peak_bytes:,} "
                     f"({-below:+.1%})", ">= 30% less", below >= 0.30))
    slower = rewritten.latency_ms["median"] / stock.latency_ms["median"] - 1
    rows.append(_row("DenseNet: best-fit+rewrites median latency vs tvm-stock",
                     f"{rewritten.latency_ms['median']:.2f} vs "
                     f"{stock.latency_ms['median']:.2f} ms ({slower:+.1%})", "within 3%",
                     abs(slower) <= 0.03))

    reports = [*plain.values(), *full.values(), *dense.values()]
    matched = all(r.outputs_match for r in reports)
    rows.append(_row("outputs_match on every build above", str(matched), "true", matched))

    print("| check | figures (one run) | target | |")
    print("|---|---|---|---|")
    print("\n".join(rows))
    print(f"\n{time.perf_counter() - started:.0f} s in all, --repeat {args.repeat}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
