"""Memory as a function of input shape: each point's need against TVM's upper-bound reservation.

    nice python benchmarks/shape_axis.py                       # resnet18 64..1024, bert 128..2048
    python benchmarks/shape_axis.py --resnet 64,128 --seq 128,256 --json var/shape-axis.json
    python benchmarks/shape_axis.py --from-json var/a.json var/b.json  # tables and chart again

Symbolic models, each compiled at every point of its axis by
:func:`planner.tvm.shape_axis.compile_shapes` (planned, built, checked against tvm-stock at
that shape): torchvision's ResNet-18 with symbolic height and width (``w = h``), and a
sequence model with a symbolic length: ``transformers:gpt2`` (a small GPT-2 decoder,
``--decoder``), or ``zoo:bert_tiny`` (an encoder, ``--decoder zoo:bert_tiny``). Per point it prints

- need: the smallest planned bytes (arena, kernel workspace, outputs) of Peakwatch's
  strategies at that shape, and which strategy;
- stock: tvm-stock's planned bytes for a build specialised to that shape;
- build-once: what TVM's symbolic build holds there: the storages its planner reserves at
  the bound (``reserved_at_bound_bytes``, sizes at ``tir_var_upper_bound``) plus the
  point's own kernel workspace and outputs, which it allocates in the call's shape;

and the ratios build-once / need and need / stock, then best-fit's peak formula. It writes
``benchmarks/shape-axis-results.md`` and the chart ``benchmarks/shape-axis.svg``.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
import time
from pathlib import Path

# Run as a script, this folder comes first on sys.path, and benchmarks/planner.py would
# shadow the planner package.
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.report import StrategyReport  # noqa: E402
from planner.shapes import label, parse_cli  # noqa: E402

STRATEGIES = ["tvm-stock", "best-fit", "best-fit+rewrites"]
HERE = Path(__file__).resolve().parent


def models(resnet: str, seq: str, decoder: str) -> dict[str, tuple[str, dict, list[str]]]:
    found = {}
    if resnet:
        bound = max(int(v) for v in resnet.split(","))
        found["resnet18"] = (
            "torchvision:resnet18", {"image": bound, "dynamic": True}, [f"h={resnet}", "w=h"]
        )
    if seq:
        bound = max(int(v) for v in seq.split(","))
        name = decoder.partition(":")[2]
        found[name] = (decoder, {"seq": bound, "dynamic": True}, [f"seq={seq}"])
    return found


def run(name: str, model: str, params: dict, axis: list[str], repeat: int, measure: bool):
    from planner.tvm.shape_axis import compile_shapes
    from planner.tvm.sources import ModelSource

    started = time.perf_counter()
    reports = compile_shapes(
        ModelSource(model, params),
        STRATEGIES,
        parse_cli(axis),
        model_name=name,
        repeat=repeat,
        memory_configs=("pooled",) if measure else (),
    )
    sys.stderr.write(f"{name}: {time.perf_counter() - started:.0f} s\n")
    return reports


def rows(reports: list[StrategyReport]) -> list[dict]:
    points: dict[tuple[str, str], list[StrategyReport]] = {}
    for report in reports:
        points.setdefault((report.model, label(report.shape_point)), []).append(report)
    found = []
    for (_, point), own in points.items():
        by = {r.strategy: r for r in own}
        stock = by.get("tvm-stock")
        ours = [r for r in own if r.strategy != "tvm-stock" and r.ok]
        if stock is None or not ours:
            continue  # listed among the failures
        best = min(ours, key=lambda r: r.planned_bytes)
        extra = stock.kernel_workspace_bytes + (stock.output_bytes or 0)
        once = stock.reserved_at_bound_bytes + extra
        found.append({
            "model": stock.model,
            "point": point,
            "value": next(iter(stock.shape_point.values())),
            "need": best.planned_bytes,
            "best": best.strategy,
            "stock": stock.planned_bytes,
            "reserved": stock.reserved_at_bound_bytes,
            "build_once": once,
            "once_over_need": once / best.planned_bytes,
            "need_over_stock": best.planned_bytes / stock.planned_bytes,
            "match": all(r.outputs_match for r in own),
        })
    return found


def markdown(table: list[dict], reports: list[StrategyReport]) -> str:
    lines = [
        "| model | point | need (best plan) B | best strategy | tvm-stock at the point B | "
        "TVM reserved at the bound B | build-once holds B | build-once / need | need / stock | "
        "outputs match |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in table:
        lines.append(
            f"| {r['model']} | {r['point']} | {r['need']:,} | {r['best']} | {r['stock']:,} | "
            f"{r['reserved']:,} | {r['build_once']:,} | {r['once_over_need']:.2f} | "
            f"{r['need_over_stock']:.3f} | {'yes' if r['match'] else 'NO'} |"
        )
    lines.append("")
    shown = set()
    for report in reports:
        formula = report.peak_formula
        if "expression" not in formula or report.model in shown:
            continue
        shown.add(report.model)
        checked = formula["checked"]
        above = [p for p, c in checked.items() if c["formula"] != c["planned"]]
        lines.append(
            f"- {report.model}, {formula['strategy']} intermediates = `{formula['expression']}` "
            f"for {', '.join(f'{s} in {lo}..{hi}' for s, (lo, hi) in formula['range'].items())}; "
            f"its plan is valid at all {len(checked)} points"
            if all(c["valid_plan"] for c in checked.values())
            else f"- {report.model}: the formula's plan overlaps at some point"
        )
        if above:
            lines.append(
                "  (above the plan made for the point itself at "
                + ", ".join(f"{p}: {checked[p]['formula']:,} vs {checked[p]['planned']:,}"
                            for p in above) + ")"
            )
    return "\n".join(lines) + "\n"


def svg(table: list[dict]) -> str:
    """One panel per model: bytes against the point, both on log scales."""
    width, height, pad = 460, 300, 56
    series = (
        ("build_once", "#c0392b", "TVM build-once"),
        ("stock", "#7f8c8d", "tvm-stock at point"),
        ("need", "#2471a3", "need (best plan)"),
    )
    panels = []
    for index, model in enumerate(dict.fromkeys(r["model"] for r in table)):
        own = [r for r in table if r["model"] == model]
        xs = [math.log2(r["value"]) for r in own]
        ys = [math.log2(r[key]) for r in own for key, _, _ in series]
        x0, x1 = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1
        y0, y1 = math.floor(min(ys)), math.ceil(max(ys))

        def px(x, x0=x0, x1=x1):
            return pad + (x - x0) / (x1 - x0) * (width - 2 * pad)

        def py(y, y0=y0, y1=y1):
            return height - pad - (y - y0) / max(y1 - y0, 1) * (height - 2 * pad)

        parts = [f'<g transform="translate({index * width},0)">',
                 f'<text x="{width / 2}" y="20" text-anchor="middle" font-weight="bold">'
                 f"{model}</text>",
                 f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" '
                 'stroke="#333"/>',
                 f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{height - pad}" stroke="#333"/>']
        for r in own:
            x = px(math.log2(r["value"]))
            parts.append(f'<text x="{x:.1f}" y="{height - pad + 16}" text-anchor="middle">'
                         f"{r['value']}</text>")
        for y in range(y0, y1 + 1, max(1, (y1 - y0) // 5)):
            parts.append(f'<text x="{pad - 4}" y="{py(y) + 4:.1f}" text-anchor="end">'
                         f"{_size(2 ** y)}</text>")
        symbol = own[0]["point"].split("=")[0]
        parts.append(f'<text x="{width / 2}" y="{height - 12}" text-anchor="middle">'
                     f"{symbol} (log scale; bytes on a log scale)</text>")
        for key, colour, _ in series:
            points = " ".join(f"{px(math.log2(r['value'])):.1f},{py(math.log2(r[key])):.1f}"
                              for r in own)
            parts.append(f'<polyline points="{points}" fill="none" stroke="{colour}" '
                         'stroke-width="2"/>')
            parts += [
                f'<circle cx="{px(math.log2(r["value"])):.1f}" '
                f'cy="{py(math.log2(r[key])):.1f}" r="3" fill="{colour}"/>'
                for r in own
            ]
        parts.append("</g>")
        panels.append("\n".join(parts))
    legend = "".join(
        f'<rect x="{pad + i * 150}" y="{height + 4}" width="12" height="12" fill="{c}"/>'
        f'<text x="{pad + i * 150 + 16}" y="{height + 14}">{name}</text>'
        for i, (_, c, name) in enumerate(series)
    )
    total = width * max(1, len(panels))
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{total}" height="{height + 24}" '
        f'font-family="sans-serif" font-size="11">\n<rect width="100%" height="100%" '
        f'fill="white"/>\n' + "\n".join(panels) + f"\n{legend}\n</svg>\n"
    )


def _size(value: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{value:g} {unit}"
        value /= 1024
    return f"{value:g} TiB"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resnet", default="64,128,256,512,1024", help="h points ('' skips)")
    parser.add_argument("--seq", default="128,256,512,1024,2048", help="seq points ('' skips)")
    parser.add_argument("--decoder", default="transformers:gpt2", help="the sequence model")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--measure", action="store_true", help="also measure pooled peaks")
    parser.add_argument("--json", type=Path, default=None, help="save every report here")
    parser.add_argument("--from-json", type=Path, nargs="+", default=None,
                        help="print saved reports (files of --json)")
    parser.add_argument("--svg", type=Path, default=HERE / "shape-axis.svg")
    parser.add_argument("--markdown", type=Path, default=HERE / "shape-axis-results.md")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    if args.from_json:
        reports = [
            StrategyReport.from_json(d)
            for path in args.from_json
            for d in json.loads(path.read_text())
        ]
    else:
        reports = []
        for name, (model, params, axis) in models(args.resnet, args.seq, args.decoder).items():
            reports += run(name, model, params, axis, args.repeat, args.measure)
            if args.json:
                args.json.write_text(json.dumps([r.to_json() for r in reports], default=str))
    failed = [f"{r.model} {label(r.shape_point)} {r.strategy}: {r.error}" for r in reports
              if r.error]
    table = rows([r for r in reports if r.ok])
    text = markdown(table, reports)
    sys.stdout.write(text + "".join(f"FAILED {line}\n" for line in failed))
    args.markdown.write_text(text)
    args.svg.write_text(svg(table))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
