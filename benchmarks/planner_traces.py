"""Trace generators for the planner benchmarks: random traces with a chosen number of live
buffers, and real ones from the TVM wing (a deep transformer, a large U-Net).

Large traces are generated, never committed: ``python benchmarks/planner_traces.py
--out var/traces`` writes the CSV files (``var/`` is ignored by git).

Usage: python benchmarks/planner_traces.py [--out var/traces] [--random 1000,...,1000000]
       [--live 50] [--tvm [--saved-every 2]]
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.problem import Buffer, Problem, write_csv  # noqa: E402

log = logging.getLogger("planner_traces")


def random_trace(buffers: int, live: int, seed: int = 0) -> Problem:
    """``buffers`` buffers, one starting per time step, each living a uniform 1..2*live-1
    steps, so that about ``live`` are live at a time; sizes log-uniform from 64 bytes to
    1 MiB in multiples of 64."""
    rng = np.random.default_rng(seed)
    lowers = np.arange(buffers, dtype=np.int64)
    lengths = rng.integers(1, max(2 * live - 1, 1), size=buffers, endpoint=True)
    sizes = 64 * np.exp(rng.uniform(0, np.log(16384), size=buffers)).astype(np.int64)
    uppers = lowers + lengths
    return Problem(
        tuple(
            Buffer(f"r{k}", lower, upper, size)
            for k, (lower, upper, size) in enumerate(
                zip(lowers.tolist(), uppers.tolist(), sizes.tolist(), strict=True)
            )
        ),
        name=f"random-{buffers}-live{live}",
    )


def tvm_trace(model: str, **params) -> Problem:
    """The planning problem TVM's CPU pipeline gives for a zoo model (needs TVM).

    The same extraction ``python -m planner compile`` plans, without building or running.
    """
    from planner.tvm.build.target import make_target
    from planner.tvm.plan import extract, lowering
    from planner.tvm.sources import ModelSource, build_network

    network = build_network(ModelSource(f"zoo:{model}", params))
    target = make_target("llvm")
    lowered = lowering.lower_to_allocations(network.mod, target)
    extraction = extract.extract(lowered, network.entry, dict(network.shape_bounds))
    problem = extraction.problem()
    label = ",".join(f"{k}={v}" for k, v in sorted(params.items()))
    return Problem(problem.buffers, name=f"{model}({label})")


def repeated(problem: Problem, copies: int, name: str) -> Problem:
    """``copies`` runs of ``problem`` one after another in time (a sequence of inferences,
    or the layers of a deeper stack of identical layers)."""
    span = max((b.upper for b in problem.buffers), default=0)
    start = min((b.lower for b in problem.buffers), default=0)
    period = span - start
    buffers = []
    for copy in range(copies):
        shift = copy * period
        buffers.extend(
            Buffer(f"{b.id}#{copy}", b.lower + shift, b.upper + shift, b.size, b.alignment)
            for b in problem.buffers
        )
    return Problem(tuple(buffers), name=name)


def training_trace(forward: Problem, name: str, saved_every: int = 1) -> Problem:
    """A training step from a forward trace: every ``saved_every``-th forward tensor is
    saved for the backward pass (``1``: all, as autograd does without checkpointing) and
    lives until the mirror image of its end there, the others die in the forward pass; the
    backward pass has one gradient per forward tensor, live over the mirror image of the
    tensor's forward interval.

    Saved activations are nested intervals that all overlap the turn from forward to
    backward: the dense, hundreds-of-millions-of-pairs case.
    """
    end = max((b.upper for b in forward.buffers), default=0)
    turn = 2 * end
    buffers = []
    for k, b in enumerate(forward.buffers):
        upper = turn - b.upper + 1 if k % saved_every == 0 else b.upper
        buffers.append(Buffer(f"{b.id}", b.lower, upper, b.size, b.alignment))
        buffers.append(
            Buffer(f"{b.id}.grad", turn - b.upper, turn - b.lower, b.size, b.alignment)
        )
    return Problem(tuple(buffers), name=name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "var" / "traces")
    parser.add_argument("--random", default="", help="buffer counts of random traces")
    parser.add_argument("--live", type=int, default=50, help="buffers live at a time")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tvm", action="store_true", help="also extract zoo model traces")
    parser.add_argument(
        "--saved-every",
        type=int,
        default=2,
        metavar="K",
        help="the training trace saves every K-th activation for the backward pass "
        "(2: 516 M overlapping pairs; 5: 207 M, the issue's ~200 M); K other than 2 is "
        "written as transformer-train-N-everyK",
    )
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for n in [int(x) for x in args.random.split(",") if x]:
        problem = random_trace(n, args.live, args.seed)
        write_csv(args.out / f"{problem.name}.csv", problem)
        sys.stdout.write(f"{args.out / problem.name}.csv: {len(problem)} buffers\n")
    if args.tvm:
        for problem in tvm_traces(args.saved_every):
            path = args.out / f"{problem.name}.csv"
            write_csv(path, problem)
            sys.stdout.write(f"{path}: {len(problem)} buffers\n")
    return 0


def tvm_traces(saved_every: int = 2) -> list[Problem]:
    """The realistic large traces, from two zoo models lowered by TVM:

    * ``transformer-train-N``: a training step of a 1,536-layer BERT-style encoder
      (hidden 256, 4 heads, sequence 128): one 12-layer block extracted from TVM, its
      trace repeated 128 times in time (the layers are identical), then mirrored into the
      backward pass with every ``saved_every``-th activation saved (the others
      recomputed); named ``transformer-train-N-everyK`` when that is not 2. The number of
      buffers does not depend on it, the overlapping pairs do (516 M with 2, 207 M with 5);
    * ``unet-seq-N``: 1,024 inferences in a row of a full-width, depth-5 U-Net at 256x256.
    """
    block = tvm_trace("bert_tiny", layers=12, seq=128, hidden=256, heads=4)
    deep = repeated(block, 128, "transformer-1536")
    train = training_trace(deep, "", saved_every=saved_every)
    unet = tvm_trace("unet", depth=5, width=1.0, resolution=256)
    runs = repeated(unet, 1024, "")
    every = "" if saved_every == 2 else f"-every{saved_every}"
    return [
        Problem(train.buffers, name=f"transformer-train-{len(train)}{every}"),
        Problem(runs.buffers, name=f"unet-seq-{len(runs)}"),
    ]


if __name__ == "__main__":
    sys.exit(main())
