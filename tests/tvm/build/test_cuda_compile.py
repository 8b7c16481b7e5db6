"""Every strategy's CUDA build compiles for real, for the architecture asked, without a GPU.

TVM's compiler here keeps a CUDA module as source, and a board compiles it with NVRTC when
it loads the library; Peakwatch's build compiles it with NVRTC too (``execute.build``), so
a kernel NVRTC rejects fails the build on any host. These tests check that it does, for
sm_80 and sm_90: each build's kernels are compiled to a cubin whose ELF header names the
architecture asked for (sm_80 and sm_90 differ there), the library holds those kernels,
and ``+rewrites`` says what became of the rewrites on a GPU.

NVRTC comes from the ``cuda`` extra (cuda-bindings, nvidia-cuda-nvrtc), which CI installs:
where it is missing these tests fail, saying so, rather than skip.
"""

from __future__ import annotations

import io
import json
import struct

import pytest
import tvm
from elftools.elf.elffile import ELFFile

from planner.tvm.build import cuda
from planner.tvm.build.kernels import KernelLibraries
from planner.tvm.compile import compile_model
from planner.tvm.sources import ModelSource
from planner.tvm.strategies import strategy_names

pytestmark = pytest.mark.slow

MODELS = {
    "small_cnn": ModelSource("zoo:small_cnn", {"channels": 4, "resolution": 8, "depth": 1}),
    # A residual block: on a GPU the second convolution's epilogue (skip add, ReLU) writes
    # over the skip tensor, element by element, thread by thread; the convolutions cannot
    # write over their own inputs (their threads read windows).
    "residual_cnn": ModelSource("zoo:residual_cnn", {"channels": 4, "resolution": 8, "blocks": 1}),
}
STRATEGIES = [name for name in strategy_names() if not name.startswith("repo:")]
EM_CUDA = 190


@pytest.fixture(scope="module")
def nvrtc():
    try:
        from cuda.bindings import nvrtc as bindings

        status, major, minor = bindings.nvrtcVersion()
    except (ImportError, RuntimeError, OSError) as exc:
        pytest.fail(
            "NVRTC is needed to compile CUDA kernels without a GPU: install the cuda extra "
            f"(pip install -e '.[cuda]': cuda-bindings, nvidia-cuda-nvrtc). {exc}"
        )
    assert int(status) == 0, f"NVRTC does not load: {status}"
    return f"{major}.{minor}"


@pytest.fixture(scope="module")
def compiled():
    """Every NVRTC compilation made by the builds, by (source, architecture): one
    compilation per distinct source, since most strategies only move tensors and leave
    the kernels as they are (NVRTC takes seconds per module on two cores)."""
    return {}


@pytest.fixture
def nvrtc_calls(monkeypatch, compiled, nvrtc):
    """(source, architecture, cubin) of each kernel compilation a build asks for."""
    real = cuda.compile_callback
    calls: list[tuple[str, str, bytes]] = []

    def compile_callback(code, target=None):
        # As the real callback reads it: where a GPU is present TVM calls it without a
        # target, inside the build's target scope or after install_compile_callback.
        named = target if target is not None else tvm.target.Target.current(allow_none=True)
        arch = str(named.attrs["arch"]) if named is not None else cuda._installed_arch[0]
        key = (code, arch)
        if key not in compiled:
            compiled[key] = bytes(real(code, target))
        calls.append((*key, compiled[key]))
        return compiled[key]

    monkeypatch.setattr(cuda, "compile_callback", compile_callback)
    return calls


def cubin_arch(cubin: bytes) -> str:
    """The ``sm_XY`` a cubin is built for, from its ELF header, checked against its
    ``.note.nv.cuinfo``."""
    elf = ELFFile(io.BytesIO(cubin))
    assert elf.header["e_machine"] in ("EM_CUDA", EM_CUDA), "not a CUDA binary"
    flags = elf.header["e_flags"]
    # CUDA 12.8 and later write ELF ABI version 8, with the SM version in bits 8-15;
    # earlier cubins hold it in the low byte.
    if elf.header["e_ident"]["EI_ABIVERSION"] >= 8:
        version = (flags >> 8) & 0xFF
    else:
        version = flags & 0xFF
    note = elf.get_section_by_name(".note.nv.cuinfo")
    if note is not None:
        # namesz, descsz, type, "NVIDIA Corp\0", then u16 note version, u16 SM version.
        data = note.data()
        namesz = struct.unpack_from("<I", data)[0]
        start = 12 + (namesz + 3) // 4 * 4
        assert struct.unpack_from("<HH", data, start)[1] == version
    return f"sm_{version}"


def embedded_cubin_archs(library: bytes) -> set[str]:
    """The architectures of cubins embedded whole in an exported library (none while TVM
    exports CUDA modules as source)."""
    found, at = set(), library.find(b"\x7fELF", 1)
    while at >= 0:
        if struct.unpack_from("<H", library, at + 18)[0] == EM_CUDA:
            found.add(cubin_arch(library[at:]))
        at = library.find(b"\x7fELF", at + 4)
    return found


# Each architecture once, each model once: the architecture reaches NVRTC the same way
# whatever the model, and every build of every strategy takes seconds on two cores.
@pytest.mark.parametrize(("model", "arch"), [("residual_cnn", "sm_80"), ("small_cnn", "sm_90")])
def test_every_strategy_builds_exports_and_compiles_its_kernels_for_the_arch(
    model, arch, tmp_path, nvrtc_calls
):
    target = json.dumps({"kind": "cuda", "arch": arch})
    libraries = KernelLibraries()

    reports = compile_model(
        MODELS[model], STRATEGIES, target=target, check_locally=False, memory_configs=[],
        artifacts_dir=tmp_path, libraries=libraries,
    )

    assert [r.strategy for r in reports] == STRATEGIES
    # Each kernel library compiled its kernels once, whichever builds link it (the plain
    # strategies one, the rewritten ones another), each to a cubin for the architecture.
    assert 1 <= len(libraries.libraries) < len(STRATEGIES)
    assert len(nvrtc_calls) == len(libraries.libraries)
    assert {cubin_arch(cubin) for _, _, cubin in nvrtc_calls} == {arch}
    sources = {code.encode() for code, _, _ in nvrtc_calls}
    for report in reports:
        assert report.error is None, f"{report.strategy}: {report.error}"
        path = report.artifacts.get("model.so")
        assert path, f"{report.strategy} exported no library"
        with open(path, "rb") as file:
            library = file.read()
        assert library, f"{report.strategy}: {path} is empty"
        embedded = embedded_cubin_archs(library)
        if embedded:
            assert embedded == {arch}, report.strategy
        else:
            # A board compiles what the library holds when it loads it: the kernels
            # compiled here.
            assert any(code in library for code in sources), report.strategy
        if "+rewrites" in report.strategy:
            rewrites = report.rewrites
            # Never silent: merges made, or each one not made with its reason.
            assert rewrites["inplace"] or rewrites["concat"] or rewrites["skipped"]
            assert all(s["reason"] for s in rewrites["skipped"])
    if model == "residual_cnn":
        rewritten = {r.strategy: r for r in reports}["best-fit+rewrites"]
        assert rewritten.rewrites["inplace"], rewritten.rewrites
        assert rewritten.intermediate_bytes < {r.strategy: r for r in reports}[
            "best-fit"].intermediate_bytes
        # The merged kernel writes through its input's pointer, and that compiled too.
        assert any(b"_inplace_kernel(" in code for code in sources)
        # The convolutions' threads read windows of their inputs: said, not left silent.
        assert any("other threads read" in s["reason"] for s in rewritten.rewrites["skipped"])


def test_an_llm_deployment_s_cuda_build_compiles_every_function_for_the_arch(nvrtc_calls):
    """The decoder of docs/llm.md with TVM's paged KV cache, built for a GPU without one:
    every function of every strategy builds, its kernels (the cache's attention kernels
    among them) compiled by NVRTC to cubins for the architecture asked for."""
    pytest.importorskip("transformers")
    from planner.tvm.llm.decoders import DecoderConfig, decoder_deployment
    from planner.tvm.llm.deployment import compile_deployment
    from planner.tvm.torch_libraries import prepare_torch_libraries

    prepare_torch_libraries()
    target = json.dumps({"kind": "cuda", "arch": "sm_80"})
    config = DecoderConfig(layers=1, hidden=64, heads=4, kv_heads=2, intermediate=128,
                           vocab=256, context_window=64, prefill_chunk=16)
    deployment = decoder_deployment(config, target=tvm.target.Target(target))

    report = compile_deployment(deployment, ["best-fit"], target=target, measure=False)

    for strategy, by_function in report.functions.items():
        assert set(by_function) == {"prefill", "decode", "batch_prefill", "batch_decode"}
        for function, r in by_function.items():
            assert r.error is None, (strategy, function, r.error)
            assert r.planned_bytes >= r.lower_bound_bytes > 0
    assert nvrtc_calls
    assert {cubin_arch(cubin) for _, _, cubin in nvrtc_calls} == {"sm_80"}
    sources = "".join(code for code, _, _ in nvrtc_calls)
    # The cache's own kernels (its paged decode attention, its append) beside the model's.
    for kernel in ("batch_decode_paged_kv_kernel", "tir_kv_cache_transpose_append_kernel",
                   "fused_split_silu_multiply_kernel"):
        assert f" {kernel}(" in sources, kernel
