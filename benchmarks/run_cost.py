"""What a run costs, phase by phase: one model under one strategy and under all of them, a
bare ``import tvm`` beside them, and the demo.

    python3 benchmarks/run_cost.py                        # zoo:resnet18 and the demo
    python3 benchmarks/run_cost.py --tree ../old-checkout # the same code paths of another checkout
    python3 benchmarks/run_cost.py --model zoo:mlp --no-demo
    python3 benchmarks/run_cost.py --cuda sm_90 --no-demo # a CUDA build, on a GPU host
    python3 benchmarks/run_cost.py --under-load 2         # the demo beside two busy compiles

Every figure comes from a fresh process, as a user's command would run, with memory and
latency measured as ``python3 -m planner compile`` measures them by default (five timed
runs, both allocators). The phases are the wall time of the functions that do each part of
a compile, timed where they are called in the compiling process (an inner phase inside an
outer one counts once, for the outer): work that runs beside the compile (the measuring
process, saving and exporting in a thread) is not a phase of it and shows only as the time
the compile waited for it. ``other`` is what no phase covers. A function a checkout lacks
is left out, so that an older checkout (``--tree``) is measured by the same rules.

The demo is timed as ``python3 manage.py demo --no-serve --fresh`` on the embedded default
(SQLite, tasks in process), with the two sandboxed phases of each job added up: the import
(the repository's code builds the model) and the compile (plans, builds, checks, measures).

``--under-load N`` times only the demo and bare imports, beside N processes that each compile
zoo:resnet18 under every strategy, over and over, as a CI host or a worker busy with other
runs would: a load that is the same from run to run, unlike whatever else the host runs.
A bare import is timed several times around the demo (the load makes it vary by half), and
the demo is compared with their median and with the fastest.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Phase -> the (module, attribute) of the functions timed for it; a class's method as
#: "Class.method".
PHASES: dict[str, list[tuple[str, str]]] = {
    "export": [("planner.tvm.compile", "imported_network")],
    "lowering": [
        ("planner.tvm.plan.lowering", "lower_to_allocations"),
        ("planner.tvm.plan.lowering", "finish_lowering"),
        ("planner.tvm.plan.variants", "extract"),
        ("planner.tvm.plan.variants", "lift_kernel_temporaries"),
        ("planner.tvm.plan.variants", "prepare_variant"),
        ("planner.tvm.compile", "prepare_variant"),
        ("planner.tvm.plan.variants", "inline_pool_padding"),
        ("planner.tvm.plan.variants", "in_chosen_order"),
    ],
    "planning": [
        ("planner.strategies", "solve"),
        ("planner.tvm.plan.strategy", "find_rewrites"),
        ("planner.tvm.plan.strategy", "apply_plan"),
        ("planner.tvm.plan.strategy", "rewrite_kernels"),
        ("planner.tvm.plan.strategy", "unalias_overlapping_calls"),
        ("planner.tvm.plan.lowering", "plan_with_stock_planner"),
        ("planner.tvm.plan.strategy", "stock_offsets"),
        ("planner.tvm.plan.strategy", "validate_plan"),
    ],
    "kernel build": [("planner.tvm.build.execute", "build")],
    "JIT or load": [
        ("planner.tvm.build.execute", "load"),
        ("planner.tvm.measure.builds", "load_executable"),
        ("planner.tvm.build.kernels", "KernelLibraries.loaded"),
    ],
    "checks": [("planner.tvm.build.execute", "run_once")],
    "timing": [("planner.tvm.build.execute", "interleaved_latency")],
    "memory": [
        ("planner.tvm.measure.builds", "BuildMeasurements.start"),
        ("planner.tvm.measure.builds", "BuildMeasurements.wait"),
        ("planner.tvm.measure.builds", "BuildMeasurements.record"),
    ],
    "export library": [
        ("planner.tvm.compile", "export_model_library"),
        ("planner.tvm.measure.builds", "export_model_library"),
    ],
}

STRATEGIES = {"one": ["best-fit"], "all": ["all"]}


def _child(
    tree: Path, model: str, params: dict, strategies: list[str], target: str, arch: str
) -> None:
    """Compile as ``python3 -m planner compile`` does, timing each phase (see the docstring)."""
    started = time.perf_counter()
    sys.path.insert(0, str(tree))
    import importlib

    import planner.tvm.compile as compiling

    imports = time.perf_counter() - started
    spent = {phase: 0.0 for phase in PHASES}
    depth = threading.local()

    def timed(phase, function):
        def wrapper(*args, **kwargs):
            outer = getattr(depth, "n", 0) == 0 and threading.current_thread() is (
                threading.main_thread()
            )
            depth.n = getattr(depth, "n", 0) + 1
            t0 = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                depth.n -= 1
                if outer:
                    spent[phase] += time.perf_counter() - t0

        return wrapper

    for phase, places in PHASES.items():
        for module_name, attribute in places:
            try:
                module = importlib.import_module(module_name)
            except ImportError:
                continue
            owner_name, _, name = attribute.rpartition(".")
            owner = getattr(module, owner_name, None) if owner_name else module
            if owner is None or not hasattr(owner, name):
                continue
            setattr(owner, name, timed(phase, getattr(owner, name)))

    from planner.tvm.sources import ModelSource
    from planner.tvm.strategies import strategy_names

    names = strategy_names() if strategies == ["all"] else strategies
    t0 = time.perf_counter()
    if not arch:
        reports = compiling.compile_model(
            ModelSource(model, params), names, target=target, repeat=5,
            memory_configs=("pooled", "naive"),
        )
    else:
        # As a CUDA board's job does it: device memory counted per build from its
        # exported library (planner/tvm/job.py), not the host allocators.
        from planner.tvm import job
        from planner.tvm.build import cuda
        with tempfile.TemporaryDirectory() as artifacts:
            reports = compiling.compile_model(
                ModelSource(model, params), names, target=cuda.target_json(target, arch),
                repeat=5, memory_configs=(), artifacts_dir=artifacts,
            )
            t1 = time.perf_counter()
            job._measure_cuda_memory(reports, arch)
            spent["memory"] += time.perf_counter() - t1
    compile_seconds = time.perf_counter() - t0
    failed = [r.strategy for r in reports if not r.ok]
    figures = {
        r.strategy: [r.planned_bytes, r.measured_peak_bytes, r.outputs_match] for r in reports
    }
    print(json.dumps({
        "imports": imports, "compile": compile_seconds, "phases": spent,
        "failed": failed, "figures": figures, "strategies": len(names),
    }))


def _demo_child(tree: Path) -> None:
    sys.path.insert(0, str(tree))
    os.chdir(tree)
    import workers.sandbox as sandbox

    spent = {"import": [0.0, 0], "compile": [0.0, 0]}
    run_job = sandbox.run_job

    def timed(job, *args, **kwargs):
        phase = job.phase if hasattr(job, "phase") else job.get("phase")
        t0 = time.perf_counter()
        try:
            return run_job(job, *args, **kwargs)
        finally:
            if phase in spent:
                spent[phase][0] += time.perf_counter() - t0
                spent[phase][1] += 1

    sandbox.run_job = timed
    from dashboard.command import main

    t0 = time.perf_counter()
    sys.argv = ["manage.py", "demo", "--no-serve", "--fresh"]
    code = main()
    seconds = time.perf_counter() - t0
    print(json.dumps({"demo": seconds, "exit": code, "jobs": spent}))


def _run(args: list[str], tree: Path, timeout: float = 3600) -> tuple[float, dict]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env["PYTHONPATH"] = str(tree)
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=env, cwd=tree,
        timeout=timeout, check=False,
    )
    wall = time.perf_counter() - t0
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"{' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return wall, json.loads(lines[-1])


def _import_tvm(tree: Path) -> float:
    """A bare ``python3 -c "import tvm"``, as a user's shell runs it."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import tvm"], env=env, cwd=tree, check=True)
    return time.perf_counter() - t0


def _loaded(tree: Path, count: int) -> list[subprocess.Popen]:
    """``count`` processes compiling zoo:resnet18 under every strategy, again and again."""
    loop = (
        "import subprocess, sys, tempfile\n"
        "while True:\n"
        "    with tempfile.TemporaryDirectory() as out:\n"
        "        subprocess.run([sys.executable, '-m', 'planner', 'compile', 'zoo:resnet18',"
        " '--strategy', 'all', '--artifacts', out], capture_output=True)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return [
        subprocess.Popen([sys.executable, "-c", loop], cwd=tree, env=env,
                         start_new_session=True)
        for _ in range(count)
    ]


def _under_load(here: list[str], tree: Path, count: int, settle: float = 20) -> None:
    loaders = _loaded(tree, count)
    try:
        time.sleep(settle)  # every loader past its imports, into its builds
        before = [_import_tvm(tree) for _ in range(3)]
        wall, demo = _run([*here, "--demo-child", "--tree", str(tree)], tree)
        after = [_import_tvm(tree) for _ in range(3)]
        load = os.getloadavg()[0]
    finally:
        for proc in loaders:
            os.killpg(proc.pid, 9)
            proc.wait()
    imports = sorted(before + after)
    median = (imports[2] + imports[3]) / 2
    print(f"beside {count} compiles of zoo:resnet18 (every strategy, in a loop); load "
          f"average {load:.1f} at the end")
    print(f"import tvm (bare python3 -c), 3 before and 3 after the demo: "
          f"{', '.join(f'{s:.2f}' for s in before + after)} s")
    print(f"demo (manage.py demo --no-serve --fresh): {wall:.1f} s wall, "
          f"{wall / median:.1f}x the median import ({median:.2f} s), "
          f"{wall / imports[0]:.1f}x the fastest ({imports[0]:.2f} s)")
    for phase, (seconds, jobs) in demo["jobs"].items():
        print(f"  sandboxed {phase} phase: {jobs} jobs, {seconds:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, default=ROOT, help="the checkout to measure")
    parser.add_argument("--model", default="zoo:resnet18")
    parser.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--target", default="llvm")
    parser.add_argument("--cuda", default="", metavar="ARCH",
                        help="a CUDA build for ARCH (sm_90), measured on this host's GPU")
    parser.add_argument("--no-demo", action="store_true")
    parser.add_argument("--under-load", type=int, default=0, metavar="N",
                        help="time only the demo and bare imports, beside N busy compiles")
    parser.add_argument("--child", choices=sorted(STRATEGIES), help=argparse.SUPPRESS)
    parser.add_argument("--demo-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    tree = args.tree.resolve()
    params = {}
    for item in args.param:
        key, _, value = item.partition("=")
        params[key] = json.loads(value) if value[:1] in "[{0123456789" else value
    if args.child:
        target = "cuda" if args.cuda else args.target
        _child(tree, args.model, params, STRATEGIES[args.child], target, args.cuda)
        return
    if args.demo_child:
        _demo_child(tree)
        return

    here = [sys.argv[0] if Path(sys.argv[0]).is_absolute() else str(ROOT / sys.argv[0])]
    if args.under_load:
        _under_load(here, tree, args.under_load)
        return
    where = f"cuda {args.cuda}" if args.cuda else args.target
    print(f"checkout {tree}, model {args.model} {params or ''}, target {where}")
    bare = _import_tvm(tree)
    rows = {}
    for which in ("one", "all"):
        extra = ["--tree", str(tree), "--model", args.model, "--target", args.target]
        extra += ["--cuda", args.cuda] if args.cuda else []
        extra += [f"-p{p}" for p in args.param]
        wall, result = _run([*here, "--child", which, *extra], tree)
        rows[which] = (wall, result)
    bare_after = _import_tvm(tree)
    tvm_import = (bare + bare_after) / 2
    print(f"\nimport tvm (bare python3 -c): {tvm_import:.2f} s (before {bare:.2f}, after "
          f"{bare_after:.2f})\n")
    print(f"{'phase':<18}{'1 strategy s':>14}{'all s':>10}")
    one, every = rows["one"][1], rows["all"][1]
    start_one = rows["one"][0] - one["compile"] - one["imports"]
    start_all = rows["all"][0] - every["compile"] - every["imports"]
    print(f"{'start-up':<18}{start_one:>14.2f}{start_all:>10.2f}")
    print(f"{'imports':<18}{one['imports']:>14.2f}{every['imports']:>10.2f}")
    for phase in PHASES:
        print(f"{phase:<18}{one['phases'][phase]:>14.2f}{every['phases'][phase]:>10.2f}")
    other_one = one["compile"] - sum(one["phases"].values())
    other_all = every["compile"] - sum(every["phases"].values())
    print(f"{'other':<18}{other_one:>14.2f}{other_all:>10.2f}")
    print(f"{'wall':<18}{rows['one'][0]:>14.2f}{rows['all'][0]:>10.2f}")
    print(f"\n{every['strategies']} strategies / 1: {rows['all'][0] / rows['one'][0]:.2f}x; "
          f"1 strategy / import tvm: {rows['one'][0] / tvm_import:.2f}x")
    for which, (_, result) in rows.items():
        if result["failed"]:
            print(f"failed ({which}): {', '.join(result['failed'])}")
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as out:
        json.dump({which: result["figures"] for which, (_, result) in rows.items()}, out)
    print(f"figures (planned, measured peak, match) by strategy: {out.name}")
    if args.no_demo:
        return
    wall, demo = _run([*here, "--demo-child", "--tree", str(tree)], tree)
    print(f"\ndemo (manage.py demo --no-serve --fresh): {demo['demo']:.1f} s recorded, "
          f"{wall:.1f} s wall, {wall / tvm_import:.1f}x import tvm")
    for phase, (seconds, count) in demo["jobs"].items():
        print(f"  sandboxed {phase} phase: {count} jobs, {seconds:.1f} s, "
              f"{seconds / max(count, 1):.2f} s each")


if __name__ == "__main__":
    main()
