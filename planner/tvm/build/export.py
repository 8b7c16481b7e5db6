"""A build as one ``model.so``: the artifact boards and users load whole."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from planner.tvm.build import quiet_io
from planner.tvm.build.kernels import KernelLibraries
from planner.tvm.build.planned import Build
from planner.tvm.plan.files import artifact_folder

log = logging.getLogger(__name__)


def export_model_library(
    root: Path, build: Build, copies: dict[int, Path], *, fcompile=None,
    libraries: KernelLibraries | None = None, scratch: Path | None = None,
) -> None:
    """The build as one ``model.so``, a kept artifact that boards and users load whole;
    strategies that share a build share its file's content (``copies``, by executable).
    With ``libraries`` (and no cross compiler), builds that share kernels share their
    machine code, generated once into ``scratch``."""
    report = build.report
    if build.executable is None:
        return
    library = artifact_folder(root, report) / "model.so"
    try:
        earlier = copies.get(id(build.executable))
        if earlier is not None:
            shutil.copyfile(earlier, library)
        else:
            if fcompile is None and libraries is not None and scratch is not None:
                libraries.export_model(build.executable, library, scratch)
            else:
                options = {} if fcompile is None else {"fcompile": fcompile}
                quiet_io.export_library(build.executable, str(library), **options)
            copies[id(build.executable)] = library
        build.library = library
        report.artifacts["model.so"] = str(library)
    except Exception as exc:  # a missing C compiler must not lose the other figures
        log.warning("export_library failed for %s: %s", report.strategy, exc)
