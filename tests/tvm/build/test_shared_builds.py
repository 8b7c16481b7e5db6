"""A model's builds share what is the same: one kernel library per set of kernels, one build
per distinct plan, one measuring process per job; no figure changes for it."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from planner.tvm.build.kernels import KernelLibraries, load_executable, save_executable
from planner.tvm.build.target import make_target
from planner.tvm.compile import compile_model
from planner.tvm.measure import memory
from planner.tvm.plan import lowering
from planner.tvm.sources import ModelSource

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.slow

MLP = ModelSource("zoo:mlp")
CNN = ModelSource("zoo:small_cnn", {"channels": 4, "resolution": 16})


def test_strategies_without_rewrites_build_their_kernels_once():
    libraries = KernelLibraries()

    reports = compile_model(
        CNN, ["none", "greedy-by-size", "best-fit"], repeat=0, memory_configs=(),
        libraries=libraries,
    )

    assert all(r.outputs_match for r in reports)
    # Three distinct plans (tvm-stock, the reference, no reuse, and one arena that the
    # greedy and best-fit strategies both find) linked to one kernel library.
    assert len(libraries.libraries) == 1
    assert libraries.libraries[0].builds == 3


def test_rewritten_kernels_get_a_library_of_their_own_shared_by_base_strategies():
    libraries = KernelLibraries()

    reports = compile_model(
        CNN, ["best-fit", "best-fit+rewrites", "optimal+rewrites"], repeat=0, memory_configs=(),
        libraries=libraries,
    )

    assert all(r.outputs_match for r in reports)
    rewritten = [r for r in reports if r.strategy.endswith("+rewrites")]
    assert all(r.rewrites["inplace"] for r in rewritten), "the CNN has in-place chains"
    assert len(libraries.libraries) == 2


def test_equal_plans_are_one_build_with_one_set_of_figures():
    reports = compile_model(CNN, ["best-fit", "optimal", "none"], repeat=3)
    by_name = {r.strategy: r for r in reports}

    # best-fit finds the optimum on the CNN: the same offsets, so the same program.
    assert by_name["best-fit"].intermediate_bytes == by_name["optimal"].intermediate_bytes
    assert by_name["best-fit"].latency_ms == by_name["optimal"].latency_ms
    assert by_name["best-fit"].measured == by_name["optimal"].measured
    # A different plan is timed on its own.
    assert by_name["none"].latency_ms["samples"] != by_name["best-fit"].latency_ms["samples"]


def test_a_kept_model_so_is_measured_to_the_same_bytes_as_a_saved_executable(tmp_path):
    strategies = ["tvm-stock", "none", "best-fit"]

    kept = compile_model(CNN, strategies, repeat=0, artifacts_dir=tmp_path)
    alone = compile_model(CNN, strategies, repeat=0)

    assert all("model.so" in r.artifacts for r in kept)
    for with_file, without in zip(kept, alone, strict=True):
        assert with_file.measured == without.measured
        assert with_file.measured["pooled"]["inference_peak_bytes"] > 0


def test_a_strategy_compiled_without_tvm_stock_is_checked_against_it_and_measured():
    # ResNet-18's kernel library takes long enough to export that a JIT compile of the
    # same library beside it (the reference's, once) crashed the process every time.
    [report] = compile_model(ModelSource("zoo:resnet18"), ["best-fit"], repeat=1)

    assert report.outputs_match, report.error
    assert report.measured["pooled"]["inference_peak_bytes"] > 0


def _saved_builds(tmp_path, strategies):
    """(executable files, kernels file, inputs file) of ``strategies``' builds of the MLP."""
    from planner.tvm import compile as compiling
    from planner.tvm.build import execute

    libraries = KernelLibraries()
    network = compiling.imported_network(MLP, make_target("llvm"), base_dir=None)
    built = []
    original = execute.build

    def keep(mod, target, shared=None):
        executable = original(mod, target, shared)
        built.append(executable)
        return executable

    execute.build = keep
    try:
        compile_model(MLP, strategies, repeat=0, memory_configs=(), libraries=libraries,
                      network=network)
    finally:
        execute.build = original
    kernels = libraries.export(libraries.libraries[0], tmp_path)
    files = []
    for index, executable in enumerate(built):
        files.append(tmp_path / f"{index}.vm")
        save_executable(executable, files[-1])
    inputs = tmp_path / "inputs.npz"
    np.savez(inputs, *compiling.check_draws(network, 0)[0])
    return files, kernels, inputs


def test_a_build_measured_after_others_reads_as_measured_alone(tmp_path):
    (stock, plain), kernels, inputs = _saved_builds(tmp_path, ["none"])

    with memory.MeasuringProcess() as process:
        alone = process.measure(plain, inputs, kernels=kernels, memory_cfg="naive")
    with memory.MeasuringProcess() as process:
        process.measure(stock, inputs, kernels=kernels, memory_cfg="pooled")
        process.measure(stock, inputs, kernels=kernels, memory_cfg="naive")
        after = process.measure(plain, inputs, kernels=kernels, memory_cfg="naive")

    # The kernel workspace pool and the allocators' pools of earlier builds stay in their
    # own children: the figures are the byte-exact ones of a first measurement.
    assert after == alone
    assert alone["inference_peak_bytes"] > 0 and alone["untracked_allocations"] == 0


def test_a_measuring_process_forked_from_a_job_measures_the_bytes_a_fresh_one_does(tmp_path):
    (stock, plain), kernels, inputs = _saved_builds(tmp_path, ["none"])
    with memory.MeasuringProcess() as process:  # this process has no shim: a fresh one
        fresh = [process.measure(build, inputs, kernels=kernels, memory_cfg=cfg)
                 for build in (stock, plain) for cfg in memory.MEMORY_CONFIGS]

    # As a worker's job does (planner.tvm.job): the shim preloaded idle, then the measuring
    # process forked from the job's own process, which imported TVM once.
    printed = _python(
        "import json, os, sys\n"
        "from pathlib import Path\n"
        "from planner.tvm.measure import memory\n"
        "memory.preload_idle_shim()\n"
        f"builds, kernels, inputs = {[str(stock), str(plain)]!r}, {str(kernels)!r}, "
        f"{str(inputs)!r}\n"
        "with memory.MeasuringProcess() as process:\n"
        "    process.start()\n"
        "    server = Path(f'/proc/{process._proc.pid}/cmdline').read_bytes()\n"
        "    figures = [process.measure(Path(b), Path(inputs), kernels=Path(kernels),\n"
        "                               memory_cfg=cfg)\n"
        "               for b in builds for cfg in memory.MEMORY_CONFIGS]\n"
        "mine = Path('/proc/self/cmdline').read_bytes()\n"
        "print(json.dumps([figures, server == mine, 'LD_PRELOAD' in os.environ,\n"
        "                  'tvm' in sys.modules]))\n"
    )
    figures, forked, preload_inherited, tvm_imported = json.loads(printed)

    assert forked and tvm_imported  # no second interpreter to import TVM again
    assert not preload_inherited  # what the job starts (the C compiler) runs without it
    assert figures == fresh
    assert all(f["inference_peak_bytes"] > 0 for f in figures)


def test_a_build_that_cannot_load_fails_alone_and_the_next_is_measured(tmp_path):
    (stock,), kernels, inputs = _saved_builds(tmp_path, [])
    broken = tmp_path / "broken.vm"
    broken.write_bytes(b"not an executable")

    with memory.MeasuringProcess() as process:
        with pytest.raises(memory.MeasurementError, match="broken.vm|Error"):
            process.measure(broken, inputs, kernels=kernels)
        figures = process.measure(stock, inputs, kernels=kernels)

    assert figures["inference_peak_bytes"] > 0


def test_a_saved_executable_runs_with_its_kernels_loaded_again(tmp_path):
    import tvm
    from tvm import relax

    (stock,), kernels, inputs = _saved_builds(tmp_path, [])

    executable = load_executable(stock, tvm.runtime.load_module(str(kernels)))
    vm = relax.VirtualMachine(executable, tvm.cpu())
    with np.load(inputs) as data:
        result = vm["forward"](*[tvm.runtime.tensor(data[k]) for k in data.files])

    assert np.isfinite(result.numpy()).all()


def _python(script: str) -> str:
    """What a fresh interpreter prints running ``script`` in the checkout."""
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip()


def test_compiling_a_zoo_model_never_imports_torch():
    printed = _python(
        "import sys\n"
        "from planner.tvm.compile import compile_model\n"
        "from planner.tvm.sources import ModelSource\n"
        "[report] = compile_model(ModelSource('zoo:mlp'), ['best-fit'], repeat=1)\n"
        "assert report.outputs_match and report.measured_peak_bytes, report.error\n"
        "print('torch' in sys.modules)\n"
    )

    assert printed == "False"


def test_a_model_file_still_gets_the_real_torch_after_tvm():
    printed = _python(
        "import planner.tvm.compile, sys\n"
        "assert 'torch' not in sys.modules\n"
        "import torch\n"
        "print(torch.ones(2).sum().item())\n"
    )

    assert printed == "2.0"


def test_what_a_worker_imports_of_the_wing_imports_no_tvm():
    # A worker names toolchains, strategies and handed-over files; it never runs TVM.
    printed = _python(
        "import sys\n"
        "import planner.tvm.sources.handover, planner.tvm.toolchain, planner.tvm.strategies\n"
        "import planner.tvm.repo_code, planner.tvm.micro.boards\n"
        "print('tvm' in sys.modules, 'torch' in sys.modules)\n"
    )

    assert printed == "False False"


def test_kept_libraries_link_kernels_generated_once_and_load_in_a_fresh_process(
    tmp_path, monkeypatch
):
    from planner.tvm.build import kernels as kernel_module

    generated = []
    emit = kernel_module._emit

    def counted(library, folder):
        if library.object_file is None or not library.object_file.is_file():
            generated.append(library.key)
        return emit(library, folder)

    monkeypatch.setattr(kernel_module, "_emit", counted)
    # TVM's export_library generates a library's machine code again at every call.
    from planner.tvm.build import quiet_io

    whole = []
    monkeypatch.setattr(quiet_io, "export_library", lambda *args, **kw: whole.append(args))
    libraries = KernelLibraries()
    strategies = ["none", "greedy-by-size", "best-fit+rewrites"]

    reports = compile_model(CNN, strategies, repeat=0, artifacts_dir=tmp_path,
                            libraries=libraries)

    # Every model.so is the one each check loaded (and matched with); the plain and the
    # rewritten kernels were each generated to machine code once, for three files.
    assert all(r.outputs_match for r in reports), [r.error for r in reports]
    assert len(libraries.libraries) == 2
    assert sorted(generated) == sorted(library.key for library in libraries.libraries)
    assert whole == []
    inputs = tmp_path / "inputs.npz"
    np.savez(inputs, np.random.default_rng(0).standard_normal((1, 3, 16, 16), "float32"))
    outputs = [
        json.loads(_python(
            "import json, numpy as np, tvm\n"
            "from tvm import relax\n"
            f"vm = relax.VirtualMachine(tvm.runtime.load_module({report.artifacts['model.so']!r}),"
            " tvm.cpu())\n"
            f"data = np.load({str(inputs)!r})\n"
            "print(json.dumps(vm['forward'](tvm.runtime.tensor(data['arr_0'])).numpy().tolist()))\n"
        ))
        for report in reports
    ]
    assert np.isfinite(outputs[0]).all() and np.asarray(outputs[0]).shape == (1, 10, 4, 4)
    for report, output in zip(reports[1:], outputs[1:], strict=True):
        np.testing.assert_allclose(output, outputs[0], rtol=1e-5, atol=1e-5,
                                   err_msg=report.strategy)


def test_the_rewritten_library_is_built_beside_the_plain_one_and_checked_and_timed_with_it(
    monkeypatch,
):
    import threading

    threads = []
    compile_library = KernelLibraries._compile

    def recorded(self, *args):
        threads.append(threading.current_thread().name.split("_")[0])
        return compile_library(self, *args)

    monkeypatch.setattr(KernelLibraries, "_compile", recorded)

    reports = compile_model(CNN, ["best-fit", "best-fit+rewrites"], repeat=3)

    assert sorted(threads) == ["MainThread", "rewrites"]
    for report in reports:
        assert report.outputs_match, report.error
        assert len(report.latency_ms["samples"]) == 3
        assert report.measured["pooled"]["inference_peak_bytes"] > 0
        assert report.reference_check


def test_two_threads_asking_for_the_same_kernels_build_them_once(monkeypatch):
    import threading

    from planner.tvm import compile as compiling

    network = compiling.imported_network(MLP, make_target("llvm"), base_dir=None)
    target = make_target("llvm")
    mod = lowering.finish_lowering(
        lowering.lower_to_allocations(network.mod, target), target, stock_planner=True
    )
    built = []
    compile_library = KernelLibraries._compile

    def slow(self, *args):
        built.append(1)
        return compile_library(self, *args)

    monkeypatch.setattr(KernelLibraries, "_compile", slow)
    libraries = KernelLibraries()
    executables = []
    start = threading.Barrier(2)

    def build():
        start.wait()
        executables.append(libraries.build(mod, target))

    workers = [threading.Thread(target=build) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()

    assert len(built) == 1 and len(libraries.libraries) == 1
    assert executables[0] is executables[1]


@pytest.mark.parametrize("repeat", [1, 2, 5])
def test_latency_has_as_many_samples_as_asked_for_every_build(repeat):
    [report] = compile_model(MLP, ["best-fit"], repeat=repeat, memory_configs=())

    assert len(report.latency_ms["samples"]) == repeat
    assert all(sample > 0 for sample in report.latency_ms["samples"])


def test_a_compile_that_keeps_no_files_runs_its_builds_on_the_libraries_it_loaded(monkeypatch):
    from planner.tvm.measure import builds as measuring

    reloaded = []
    load = measuring.load_executable
    monkeypatch.setattr(measuring, "load_executable",
                        lambda *args: reloaded.append(args) or load(*args))
    libraries = KernelLibraries()

    reports = compile_model(CNN, ["none", "best-fit", "best-fit+rewrites"], repeat=1,
                            libraries=libraries)

    # Every build was linked to its library's shared object, loaded once as it was built:
    # none was saved and loaded again to be checked, and each was still measured.
    assert reloaded == []
    assert all(library.loaded is not None for library in libraries.libraries)
    for report in reports:
        assert report.outputs_match, report.error
        assert report.measured["pooled"]["inference_peak_bytes"] > 0
