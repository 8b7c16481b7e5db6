"""Whether two checkouts give the same figures: every report field but the timings, for the
zoo's models at their default sizes and some of torchvision's networks.

    python3 benchmarks/same_figures.py ../other-checkout
    python3 benchmarks/same_figures.py ../other-checkout --strategy all zoo:resnet18

For a change that should move no figure (how builds are made, shared or measured): planned
bytes, lower bounds, rewrites, measured peaks and allocator figures, matches and their
differences must be equal to the byte; latencies, compile and plan seconds may differ.
Each checkout compiles each model in a process of its own, one checkout after the other.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SOURCES = [
    "zoo:small_cnn", "zoo:residual_cnn", "zoo:resnet18", "zoo:mobilenet_v2", "zoo:densenet",
    "zoo:pool_reuse", "zoo:unet", "zoo:bert_tiny", "zoo:mlp", "zoo:int8_vgg", "zoo:randwire",
    "torchvision:resnet18", "torchvision:mobilenet_v3_small",
]
STRATEGIES = ["tvm-stock", "none", "best-fit", "best-fit+rewrites"]
#: Fields that are times, not figures.
TIMES = {"latency_ms", "compile_seconds", "plan_seconds"}


def _compile(tree: Path, sources: list[str], strategies: list[str], out: Path) -> None:
    """Each source in a process of its own, as a job compiles one model: where the checkout
    forks its measuring process from the compiling one (``preload_idle_shim``), that is
    the way it measures here too."""
    found = {}
    for source in sources:
        script = f"""
import json, sys
sys.path.insert(0, {str(tree)!r})
try:  # the wing by stage, or a checkout from before it (one flat folder)
    from planner.tvm.measure import memory
    from planner.tvm.sources import ModelSource
except ImportError:
    from planner.tvm import memory
    from planner.tvm.zoo import ModelSource
if hasattr(memory, "preload_idle_shim"):
    memory.preload_idle_shim()
from planner.tvm.compile import compile_model
from planner.tvm.strategies import strategy_names
names = strategy_names() if {strategies!r} == ["all"] else {strategies!r}
params = {{"image": 32}} if {source!r}.startswith("torchvision:") else {{}}
reports = compile_model(ModelSource({source!r}, params), names, repeat=1)
json.dump([r.to_json() for r in reports], open({str(out)!r}, "w"), default=str)
"""
        env = {**os.environ, "PYTHONPATH": str(tree)}
        subprocess.run([sys.executable, "-c", script], cwd=tree, env=env, check=True)
        found[source] = json.loads(out.read_text())
    out.write_text(json.dumps(found))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("other", type=Path, help="the checkout to compare this one with")
    parser.add_argument("sources", nargs="*", default=SOURCES)
    parser.add_argument("--strategy", action="append", default=None)
    args = parser.parse_args()
    strategies = args.strategy or STRATEGIES
    with tempfile.TemporaryDirectory() as tmp:
        figures = []
        for index, tree in enumerate((ROOT, args.other.resolve())):
            out = Path(tmp) / f"{index}.json"
            _compile(tree, args.sources, strategies, out)
            figures.append(json.loads(out.read_text()))
    differ = 0
    for source in args.sources:
        for here, there in zip(figures[0][source], figures[1][source], strict=True):
            fields = {
                key for key in set(here) | set(there)
                if key not in TIMES and here.get(key) != there.get(key)
            }
            ok = here.get("outputs_match") and not here.get("error")
            verdict = "same" if not fields else "DIFFERENT: " + ", ".join(sorted(fields))
            print(f"{source:<32}{here['strategy']:<28}{'ok ' if ok else 'ERR'} {verdict}")
            differ += bool(fields)
    print(f"\n{differ} reports differ" if differ else "\nevery figure is the same")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
