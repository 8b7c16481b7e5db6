"""Every architecture a user brings, tiny and with random weights: does it plan, build and
match PyTorch, what do tvm-stock and best-fit+rewrites plan, and where it fails, which step.

    python benchmarks/architectures.py [--only NAME ...] [--no-memory]

One row per architecture and form (a static length or image, or a symbolic ``seq`` along
the points 8 and 16), each compiled by ``python3 -m planner compile`` in its own process
from ``benchmarks/architectures_models.py`` (decoders are called with token ids alone, no
mask). Columns: planned bytes under each strategy, +rewrites/stock, the measured peak
against the plan (``peak/plan``: TVM's naive allocator's peak, each allocation at its own
size, over planned bytes, the worst strategy and point; above 1.00 the runtime held more than
the plan accounted for), the largest difference from PyTorch, and the failing step's first
words. The figures in docs/benchmarks.md come from this script.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "benchmarks" / "architectures_models.py"
STRATEGIES = ("tvm-stock", "best-fit+rewrites")

#: (row name, architecture, the --dim places of seq, or "" for the static form)
ROWS = [
    (arch, arch, "") for arch in (
        "gpt2", "llama", "falcon-mqa", "deepseek-v3", "deepseek-v2", "mixtral",
        "deepseek-v3-moe", "qwen2-moe", "olmoe", "mamba", "mamba2", "bart", "mbart", "marian",
        "t5", "whisper", "vit", "deit", "swin", "convnext", "mobilevit",
    )
] + [
    (f"{arch} (seq)", arch, places) for arch, places in (
        ("gpt2", "input_ids:1"), ("llama", "input_ids:1"), ("deepseek-v3", "input_ids:1"),
        ("mixtral", "input_ids:1"), ("mamba", "input_ids:1"),
        ("bart", "input_ids:1,decoder_input_ids:1"), ("t5", "input_ids:1,decoder_input_ids:1"),
        ("whisper", "decoder_input_ids:1"),
    )
]


def compile_row(arch: str, places: str, memory: bool) -> tuple[list[dict], str, float]:
    """The reports of one row, the CLI's error where it wrote none, and its seconds."""
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "reports.json"
        command = [
            sys.executable, "-m", "planner", "compile", f"{MODELS}:model",
            "--param", f"arch={arch}", "--repeat", "0", "--json", str(out),
        ]
        for strategy in STRATEGIES:
            command += ["--strategy", strategy]
        if places:
            command += ["--shape", "seq=8,16", "--dim", f"seq={places}"]
        if not memory:
            command.append("--no-memory")
        started = time.perf_counter()
        done = subprocess.run(
            command, cwd=ROOT, capture_output=True, text=True, check=False, timeout=1800
        )
        seconds = time.perf_counter() - started
        if not out.exists():
            lines = done.stderr.splitlines()
            said = [i for i, line in enumerate(lines) if line.startswith("planner:")]
            if not said:
                return [], done.stderr.strip()[-300:], seconds
            # The refusal's first line, and where it names the line of the model at fault.
            found = [line for line in lines[said[-1]:] if line.startswith("the length was")]
            return [], " / ".join([lines[said[-1]], *found[:1]]), seconds
        return json.loads(out.read_text()), "", seconds


def _cell(value) -> str:
    return "-" if value is None else f"{value:,}"


def summarise(name: str, reports: list[dict], error: str, seconds: float) -> str:
    if not reports:
        return f"| {name} | no | - | - | - | - | - | {error[:400]} | {seconds:.0f} |"
    # Along the axis the row gives the largest point, where the plan is biggest.
    biggest = max((r.get("shape_point") or {}).get("seq", 0) for r in reports)
    at = {
        r["strategy"]: r for r in reports
        if (r.get("shape_point") or {}).get("seq", 0) == biggest
    }
    failed = [r for r in reports if r.get("error")]
    works = "yes" if not failed else ("no" if len(failed) == len(reports) else "partly")
    stock, best = at.get(STRATEGIES[0], {}), at.get(STRATEGIES[1], {})
    ratio = "-"
    if stock.get("planned_bytes") and best.get("planned_bytes"):
        ratio = f"{best['planned_bytes'] / stock['planned_bytes']:.2f}"
    # The naive allocator's peak: every allocation at its own size, no pool's rounding.
    peaks = [
        r["measured"]["naive"]["inference_peak_bytes"] / r["planned_bytes"] for r in reports
        if r.get("planned_bytes")
        and ((r.get("measured") or {}).get("naive") or {}).get("inference_peak_bytes")
    ]
    diffs = [r["reference_max_abs_diff"] for r in reports
             if r.get("reference_max_abs_diff") is not None]
    why = failed[0]["error"].splitlines()[0][:200] if failed else ""
    return (
        f"| {name} | {works} | {_cell(stock.get('planned_bytes'))} "
        f"| {_cell(best.get('planned_bytes'))} | {ratio} "
        f"| {f'{max(peaks):.3f}' if peaks else '-'} | {f'{max(diffs):.1e}' if diffs else '-'} "
        f"| {why} | {seconds:.0f} |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", nargs="*", default=None, help="row names to run")
    parser.add_argument("--no-memory", action="store_true", help="skip the measured peaks")
    args = parser.parse_args(argv)
    rows = [row for row in ROWS if not args.only or row[0] in args.only]
    print(
        "| architecture | works | tvm-stock B | best-fit+rewrites B | +rewrites/stock "
        "| peak/plan | vs PyTorch | failed step | s |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    failures = 0
    for name, arch, places in rows:
        reports, error, seconds = compile_row(arch, places, not args.no_memory)
        line = summarise(name, reports, error, seconds)
        failures += " | yes | " not in line
        print(line, flush=True)
    print(f"{len(rows) - failures} of {len(rows)} rows work")
    return 0


if __name__ == "__main__":
    sys.exit(main())
