"""The child side of a sandboxed compile: ``python -m planner.tvm.job JOB.json OUT.json``.

The worker writes the job (what :func:`planner.tvm.compile.compile_model` takes, as JSON),
runs this module in its sandbox, and reads back one report per strategy. Everything a
tracked repository brings (model files, pipeline, planner) is imported here, never in the
worker. A model that cannot be built still answers: one failed report per strategy, with
the reason.

A job with a ``micro`` key (``board`` and/or ``machine``, optional ``sram_bytes`` and
``flash_bytes``) is a micro board's: the C build is compiled and checked, then exported,
built and run on the emulated board here too (:mod:`planner.tvm.micro.report`), since both
build the model from what may be repository code.

The interpreter that runs this module is the toolchain's (:mod:`planner.tvm.toolchain`): its
TVM is the one imported here, and each report names the job's ``toolchain`` spec.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

from planner.report import StrategyReport


def run(job: dict) -> list[StrategyReport]:
    from planner.tvm.compile import compile_model
    from planner.tvm.zoo import ModelSource

    source = ModelSource(job["source"], job.get("params") or {})
    options = {
        key: job[key]
        for key in (
            "target",
            "repeat",
            "lift_temporaries",
            "check_locally",
            "pipeline",
            "planner_time_limit",
            "artifacts_dir",
            "base_dir",
        )
        if key in job
    }
    if "memory_configs" in job:
        options["memory_configs"] = tuple(job["memory_configs"])
    micro = job.get("micro")
    if micro is not None:
        from planner.tvm.micro import report as micro_report

        options.update(micro_report.compile_options(options))
    try:
        reports = compile_model(source, job["strategies"], model_name=job["model"], **options)
    except Exception as exc:  # a model that does not build is a failed Result per strategy
        logging.getLogger(__name__).exception("model %s failed to build", job["model"])
        return [
            StrategyReport.failed(
                job["model"],
                strategy,
                f"{type(exc).__name__}: {exc}",
                model_source=job["source"],
            )
            for strategy in job["strategies"]
        ]
    if micro is not None:
        micro_report.run_on_board(
            reports,
            source,
            micro,
            model_name=job["model"],
            artifacts_dir=job.get("artifacts_dir"),
            base_dir=job.get("base_dir"),
            pipeline=job.get("pipeline", ""),
        )
    return reports


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    job = json.loads(Path(argv[0]).read_text())
    reports = run(job)
    for report in reports:
        # Failed reports too: the worker records each under the toolchain it asked for.
        report.environment["toolchain"] = job.get("toolchain", "")
    Path(argv[1]).write_text(json.dumps([r.to_json() for r in reports], default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
