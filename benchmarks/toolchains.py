"""What each TVM release does to a model's memory: stock plan, measured peak, latency, and
the best Peakwatch strategy, under every toolchain that works.

    python benchmarks/toolchains.py [--toolchain SPEC ...] [--repeat 3] [--resolution 224]

Each toolchain (``""`` is this environment's TVM) is created on first use under
``PEAKWATCH_TOOLCHAIN_DIR`` (``~/.cache/peakwatch/toolchains``), then every model is
compiled with ``python -m planner compile --toolchain SPEC``, all strategies of one model
timed in the same interleaved rounds, so the ratios to ``tvm-stock`` come from one run.
A toolchain that is refused is reported with its reason. Where two releases' stock plans
differ, the tensors that changed are listed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.tvm import toolchain as toolchains  # noqa: E402

MODELS = {
    "ResNet-18": ("zoo:resnet18", {"width": 1.0}),
    "MobileNetV2": ("zoo:mobilenet_v2", {}),
}
STRATEGIES = ["tvm-stock", "best-fit", "best-fit+rewrites"]
DEFAULT_TOOLCHAINS = ["apache-tvm==0.26.0", "", "apache-tvm==0.25.0"]


def compile_under(spec: str, source: str, params: dict, args, folder: Path) -> list[dict]:
    out = folder / "reports.json"
    command = [sys.executable, "-m", "planner", "compile", source, "--repeat", str(args.repeat),
               "--json", str(out), "--artifacts", str(folder / "artifacts")]
    for strategy in args.strategy:
        command += ["--strategy", strategy]
    for key, value in params.items():
        command += ["--param", f"{key}={json.dumps(value)}"]
    if spec:
        command += ["--toolchain", spec]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    if not out.exists():
        raise RuntimeError(f"compile under {spec or 'this environment'} failed:\n"
                           f"{done.stderr[-2000:]}")
    return json.loads(out.read_text())


def best(reports: list[dict]) -> dict | None:
    """The Peakwatch strategy with the lowest measured peak among builds that match."""
    candidates = [r for r in reports if r["strategy"] != "tvm-stock" and r["outputs_match"]
                  and r["measured_peak_bytes"]]
    return min(candidates, key=lambda r: (r["measured_peak_bytes"], r["planned_bytes"]),
               default=None)


def plan_tensors(report: dict) -> dict[str, dict]:
    plan = json.loads(Path(report["artifacts"]["plan.json"]).read_text())
    return {t["id"]: t for t in plan.get("tensors", [])}


def stock_change(before: dict, after: dict) -> list[str]:
    """How the stock plan of ``after`` differs from ``before``'s, tensor by tensor."""
    old, new = plan_tensors(before), plan_tensors(after)
    lines = []
    for tensor in sorted(old.keys() | new.keys()):
        a, b = old.get(tensor), new.get(tensor)
        if a is None or b is None:
            lines.append(f"{tensor}: {'added' if a is None else 'removed'} "
                         f"({(b or a)['size']:,} B)")
            continue
        changed = [f"{k} {a.get(k)} -> {b.get(k)}" for k in ("size", "lower", "upper")
                   if a.get(k) != b.get(k)]
        if changed:
            lines.append(f"{tensor}: {', '.join(changed)}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--toolchain", action="append", default=None,
                        help="a toolchain spec; repeat (default: 0.26.0, this one, 0.25.0)")
    parser.add_argument("--strategy", action="append", default=None)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--resolution", type=int, default=224)
    args = parser.parse_args(argv)
    args.strategy = args.strategy or STRATEGIES
    specs = DEFAULT_TOOLCHAINS if args.toolchain is None else args.toolchain

    working: dict[str, toolchains.Toolchain] = {}
    for spec in specs:
        try:
            working[spec] = toolchains.ensure(spec, toolchains.default_root(),
                                              lambda line: print(line, file=sys.stderr))
        except toolchains.ToolchainError as exc:
            print(f"refused: {exc}\n")

    print("| model | toolchain | TVM | tvm-stock planned | measured peak | latency ms "
          "| best strategy | planned | measured peak | latency |")
    print("|---|---|---|---:|---:|---:|---|---:|---:|---:|")
    stock_by_model: dict[str, list[tuple[str, dict]]] = {}
    with tempfile.TemporaryDirectory(prefix="peakwatch-toolchains-") as scratch:
        for name, (source, params) in MODELS.items():
            params = {**params, "resolution": args.resolution}
            for number, (spec, made) in enumerate(working.items()):
                folder = Path(scratch) / f"{name}-{number}"
                folder.mkdir()
                reports = compile_under(spec, source, params, args, folder)
                by = {r["strategy"]: r for r in reports}
                stock, top = by["tvm-stock"], best(reports)
                stock_by_model.setdefault(name, []).append((spec or "this environment", stock))
                label = spec or "this environment"
                latency = stock["latency_ms"]["median"]
                cells = [name, label, f"{made.tvm_version} ({made.tvm_git_hash})",
                         f"{stock['planned_bytes']:,}", f"{stock['measured_peak_bytes']:,}",
                         f"{latency:.1f}"]
                if top is None:
                    cells += ["-", "-", "-", "-"]
                else:
                    cells += [
                        top["strategy"],
                        f"{top['planned_bytes'] / stock['planned_bytes']:.3f}",
                        f"{top['measured_peak_bytes'] / stock['measured_peak_bytes']:.3f}",
                        f"{top['latency_ms']['median'] / latency:.3f}",
                    ]
                print("| " + " | ".join(cells) + " |", flush=True)
        print()
        for name, stocks in stock_by_model.items():
            for (label_a, a), (label_b, b) in zip(stocks, stocks[1:], strict=False):
                lines = stock_change(a, b)
                if a["planned_bytes"] == b["planned_bytes"] and not lines:
                    print(f"{name}: the stock plan is the same under {label_a} and {label_b} "
                          f"({a['planned_bytes']:,} B planned)")
                    continue
                print(f"{name}: the stock plan changed from {label_a} to {label_b}: "
                      f"{a['planned_bytes']:,} -> {b['planned_bytes']:,} B planned, "
                      f"{len(lines)} tensors differ")
                for line in lines[:20]:
                    print(f"    {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
