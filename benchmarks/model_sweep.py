"""Every architecture of the installed transformers, as a new user would bring it: does it
plan under tvm-stock and best-fit+rewrites and match PyTorch, and where not, which step and
why.

    python benchmarks/model_sweep.py [--family causal-lm ...] [--only ARCH ...]
        [--jobs N] [--results FILE] [--timeout S] [--table]

Each architecture of a family's auto mapping (``causal-lm``: every causal-LM model type;
``image-classification`` and ``base``: those that take pixel values or token ids) is built
tiny with random weights by ``benchmarks/model_sweep_models.py`` (hidden 64, 2 layers,
4 heads, 2 KV heads, vocabulary 1,024, sequence 64, read from its own configuration class),
first run in PyTorch alone, then through ``python -m planner compile`` in its own process,
as a user's model file. One JSON line per architecture goes to ``--results`` (default
``benchmarks/model-sweep.jsonl``): the sweep resumes where it stopped, skipping the rows
there, so it can be stopped and run again. ``--table`` prints the markdown table of
docs/benchmarks.md from that file and runs nothing.

Columns: whether PyTorch runs it, the step reached (exported, imported, built, matched),
planned bytes per strategy, +rewrites/stock, the step that failed and its message, and whose
the cause is (torch's, TVM's or Peakwatch's, by the step and the message).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "benchmarks" / "model_sweep_models.py"
RESULTS = ROOT / "benchmarks" / "model-sweep.jsonl"
STRATEGIES = ("tvm-stock", "best-fit+rewrites")
FAMILIES = ("causal-lm", "image-classification", "base", "timm")
#: The steps a row goes through; a failure at one means every earlier one passed.
REACHED = {
    "source": "pytorch", "export": "pytorch", "import": "exported", "fold": "imported",
    "pipeline": "imported", "lower": "imported", "plan": "imported", "build": "imported",
    "check": "built",
}
#: Whose a failure at each step is, before the message says more.
OWNER = {
    "export": "torch", "import": "TVM importer", "fold": "TVM", "lower": "TVM",
    "build": "TVM", "plan": "Peakwatch", "check": "match",
}

_PROBE = """
import sys, json, torch
sys.path.append({benchmarks!r})  # after the project: benchmarks/planner.py is a script
import model_sweep_models as m
try:
    module, inputs = m.model({family!r}, {arch!r})
    with torch.no_grad():
        out = module(*inputs)
    takes = "pixels" if inputs[0].is_floating_point() else "ids"
    print(json.dumps({{"runs": torch.is_tensor(out), "takes": takes}}))
except Exception as exc:
    print(json.dumps({{"runs": False, "error": f"{{type(exc).__name__}}: {{exc}}"[:300]}}))
"""


def architectures(family: str) -> list[str]:
    code = (
        f"import sys, json; sys.path.append({str(ROOT / 'benchmarks')!r}); "
        f"import model_sweep_models as m; print(json.dumps(m.architectures({family!r})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def probe(family: str, arch: str, timeout: float) -> dict:
    """Whether PyTorch runs the tiny ``arch`` at all, in a process of its own."""
    code = _PROBE.format(benchmarks=str(ROOT / "benchmarks"), family=family, arch=arch)
    try:
        done = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
            timeout=timeout, check=False,
        )
    except subprocess.TimeoutExpired:
        return {"runs": False, "error": f"PyTorch's forward ran past {timeout:.0f} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return {"runs": False, "error": done.stderr.strip()[-300:]}
    return json.loads(lines[-1])


def compile_row(family: str, arch: str, timeout: float) -> dict:
    """``planner compile`` on the tiny ``arch``: reports per strategy, or the CLI's error."""
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "reports.json"
        command = [
            sys.executable, "-m", "planner", "compile", f"{MODELS}:model",
            "--param", f"family={family}", "--param", f"arch={arch}",
            "--repeat", "0", "--no-memory", "--json", str(out),
        ]
        for strategy in STRATEGIES:
            command += ["--strategy", strategy]
        try:
            done = subprocess.run(
                command, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return {"error": f"timeout: the compile ran past {timeout:.0f} s", "step": "timeout"}
        if out.exists():
            return {"reports": json.loads(out.read_text())}
        lines = done.stderr.splitlines()
        said = [i for i, line in enumerate(lines) if line.startswith("planner: ")]
        # The refusal runs from its first line to the end: the place, torch's advice, why.
        error = ("\n".join(lines[said[-1]:])[len("planner: "):] if said
                 else done.stderr.strip()[-400:])
        return {"error": error, "step": error.split(" failed: ")[0] if " failed: " in error
                else "source"}


def _commit() -> str:
    """The checkout's commit, with "+" where it has changes: the code a row ran."""
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                          capture_output=True, text=True, check=False).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                           capture_output=True, text=True, check=False).stdout.strip()
    return head + ("+" if dirty else "")


def run_row(family: str, arch: str, timeout: float) -> dict:
    started = time.perf_counter()
    row = {"family": family, "arch": arch, "commit": _commit()}
    row.update(probe(family, arch, timeout))
    if row["runs"]:
        row.update(compile_row(family, arch, timeout))
    row["seconds"] = round(time.perf_counter() - started, 1)
    return summarise(row)


def summarise(row: dict) -> dict:
    """The row's outcome: the step reached, planned bytes, and the failure's step, words
    and owner."""
    reports = row.pop("reports", None)
    if not row["runs"]:
        row.update(reached="-", failed_step="pytorch", owner="transformers on this CPU",
                   message=row.get("error", ""))
        return row
    if reports is None:
        step = row.get("step", "source")
        row.update(reached=REACHED.get(step, "pytorch"), failed_step=step,
                   owner=_owner(step, row["error"]), message=row["error"])
        return row
    by = {r["strategy"]: r for r in reports}
    row["planned"] = {s: by.get(s, {}).get("planned_bytes") for s in STRATEGIES}
    row["max_abs_diff"] = max(
        (r["reference_max_abs_diff"] for r in reports
         if r.get("reference_max_abs_diff") is not None), default=None,
    )
    failed = [r for r in reports if r.get("error") or not r.get("outputs_match")]
    row["assumptions"] = sorted({a for r in reports for a in (r.get("assumptions") or [])})
    if not failed:
        row.update(reached="matched", failed_step="", owner="", message="")
        return row
    error = failed[0].get("error") or "the output differs from PyTorch's"
    step = error.split(" failed: ")[0] if " failed: " in error else "check"
    row.update(reached=REACHED.get(step, "built"), failed_step=step,
               owner=_owner(step, error), message=error)
    return row


#: Causes told by their words: (pattern, whose the cause is, what a user can do).
CAUSES = [
    (r"expert_hit|sequential_experts_gemm|for expert_idx|expert_size|tokens_per_expert"
     r"|unsupported operand type\(s\) for \+: 'Node' and 'int'",
     "Peakwatch: a dispatch over experts not put in fixed shapes",
     "write the experts' forward in fixed shapes (every expert on every token, weighted) in "
     "the model file"),
    (r"has no fixed-shape form here",
     "Peakwatch: a routed block that is no weighting of its experts (JetMoE's mixture of "
     "attention heads, its head count fixed at top-k)",
     "write the block's forward in fixed shapes in the model file; it is then kept"),
    (r"IndexPut requires|Binary operators must have the same datatype",
     "TVM importer: a dtype rule", "cast the operands in the model file"),
    (r"complex tensor", "Peakwatch: complex arithmetic beyond rotary embeddings (an FFT)",
     "compute the FFT in real arithmetic, or leave it out of the compiled part"),
    (r"mutation on a view chain", "torch: export cannot functionalise an in-place write "
     "through as_strided", "write the update out of place"),
    (r"Attempting to broadcast a dimension",
     "transformers: its code takes another path under export", "-"),
    (r"torch could not run the specialised program",
     "torch: draft_export's program does not run (vmap)", "-"),
    (r"program differs from the model's own forward",
     "the model (transformers): it computes another way when traced",
     "make the traced path compute what the model computes"),
    (r"match_cast is not supported", "Peakwatch: a size read from the input's values "
     "(an unbacked symbol) is not planned", "give the model fixed lengths"),
    (r"differs from PyTorch", "numerics", "see the difference against the output's scale"),
    (r"Unsupported function types", "TVM importer: an operator it lacks",
     "write that part with operators TVM has"),
]


def _owner(step: str, message: str) -> str:
    return _cause(step, message)[0]


def _cause(step: str, message: str) -> tuple[str, str]:
    """Whose the failure is and what a user can do, from its step and words."""
    import re

    for pattern, owner, remedy in CAUSES:
        if re.search(pattern, message):
            return owner, remedy
    if step == "timeout":
        return "Peakwatch (time)", "-"
    if "Peakwatch" in message or "refus" in message:
        return "Peakwatch", "-"
    return OWNER.get(step, "Peakwatch"), "-"


def table(rows: list[dict]) -> str:
    lines = [
        "| family | architecture | reached | tvm-stock B | best-fit+rewrites B "
        "| +rewrites/stock | failed step | cause | what a user can do | message | s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in sorted(rows, key=lambda r: (r["family"], r["arch"])):
        planned = row.get("planned") or {}
        stock, best = planned.get(STRATEGIES[0]), planned.get(STRATEGIES[1])
        ratio = f"{best / stock:.2f}" if stock and best else "-"
        message = " ".join(row.get("message", "").split())[:160].replace("|", "\\|")
        owner, remedy = (_cause(row["failed_step"], row.get("message", ""))
                         if row["failed_step"] and row["runs"] else (row["owner"], "-"))
        lines.append(
            f"| {row['family']} | {row['arch']} | {row['reached']} "
            f"| {f'{stock:,}' if stock else '-'} | {f'{best:,}' if best else '-'} | {ratio} "
            f"| {row['failed_step'] or '-'} | {owner or '-'} | {remedy} | {message or '-'} "
            f"| {row['seconds']:.0f} |"
        )
    runs = [r for r in rows if r["runs"]]
    matched = [r for r in runs if r["reached"] == "matched"]
    share = f"{100 * len(matched) / len(runs):.0f}%" if runs else "-"
    lines.append("")
    lines.append(
        f"{len(matched)} of {len(runs)} architectures that PyTorch runs here plan under both "
        f"strategies and match PyTorch ({share}); {len(rows) - len(runs)} of {len(rows)} "
        "do not run in PyTorch on this CPU."
    )
    for family in sorted({r["family"] for r in rows}):
        of = [r for r in runs if r["family"] == family]
        ok = [r for r in of if r["reached"] == "matched"]
        lines.append(f"- {family}: {len(ok)} of {len(of)}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--family", nargs="*", default=["causal-lm"], choices=FAMILIES)
    parser.add_argument("--only", nargs="*", default=None, help="architectures to run")
    parser.add_argument("--jobs", type=int, default=1, help="rows compiled at once")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per step")
    parser.add_argument("--table", action="store_true", help="print the table, run nothing")
    parser.add_argument("--again", action="store_true", help="rerun rows already there")
    args = parser.parse_args(argv)
    done = {}
    if args.results.exists():
        for line in args.results.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                done[(row["family"], row["arch"])] = row
    if args.table:
        chosen = [r for r in done.values() if r["family"] in args.family
                  and (not args.only or r["arch"] in args.only)]
        print(table(chosen))
        return 0
    todo = [
        (family, arch) for family in args.family for arch in architectures(family)
        if (not args.only or arch in args.only) and (args.again or (family, arch) not in done)
    ]
    print(f"{len(todo)} rows to run, {len(done)} already in {args.results}", flush=True)
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        running = [pool.submit(run_row, family, arch, args.timeout) for family, arch in todo]
        for finished in as_completed(running):
            row = finished.result()
            done[(row["family"], row["arch"])] = row
            # Rewritten whole each time: a rerun row replaces its old line.
            args.results.write_text("".join(json.dumps(r) + "\n" for r in done.values()))
            print(f"{row['family']} {row['arch']}: {row['reached']} "
                  f"{row['failed_step']} {row['message'][:120]} ({row['seconds']:.0f} s)",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
