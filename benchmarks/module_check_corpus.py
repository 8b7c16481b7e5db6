"""Every real network's module, in every form a repository may hand over, through the module
check: how many forms, how many refused (the allowlist's false refusals; 0 is the target).

    python benchmarks/module_check_corpus.py
    python benchmarks/module_check_corpus.py --torchvision resnet18,densenet121 --timm ghostnet_050
    /path/to/toolchain/venv/bin/python benchmarks/module_check_corpus.py   # another TVM

Forms per network: as built, in fp16 (``ToMixedPrecision``), legalised and fused, and through
the ``llvm`` and ``cuda`` pipelines' dispatch and legalisation (dlight schedules included);
a form TVM itself cannot produce for a network is counted as skipped. Refusals are printed
with the network, the form and the reason. Run under each TVM release a worker may use.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# torchvision's compiled operators do not load beside the CPU torch; its models need none.
sys.modules.setdefault("torchvision._meta_registrations", type(sys)("meta_registrations"))


def forms(mod):
    """(name, module) of each form of ``mod`` a repository's pipeline may hand over."""
    import tvm
    from tvm import relax

    from planner.tvm.plan.lowering import _backend

    yield "raw", lambda: mod
    yield "fp16", lambda: relax.transform.ToMixedPrecision(out_dtype="float16")(mod)
    for name in ("llvm", "cuda"):
        target = tvm.target.Target(name)

        def fused(target=target):
            with target:
                return tvm.transform.Sequential([
                    relax.transform.LegalizeOps(), relax.transform.AnnotateTIROpPattern(),
                    relax.transform.FoldConstant(), relax.transform.FuseOps(),
                    relax.transform.FuseTIR(),
                ])(mod)

        def legalised(target=target):
            backend = _backend(target)
            passes = backend.library_dispatch_passes(target) + backend.legalize_passes(target)
            with target:
                return tvm.transform.Sequential(passes)(mod)

        yield f"fused-{name}", fused
        yield f"legalised-{name}", legalised


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torchvision", default="resnet18,mobilenet_v3_small,squeezenet1_0,"
                        "efficientnet_b0,shufflenet_v2_x0_5,regnet_y_400mf,densenet121")
    parser.add_argument("--timm", default="ghostnet_050")
    parser.add_argument("--image", type=int, default=32)
    args = parser.parse_args()

    import tvm

    from planner.tvm.sources import ModelSource, build_network
    from planner.tvm.sources.module_check import UnsafeModule, check_module_json
    from planner.tvm.zoo import zoo_names
    root = Path(__file__).resolve().parents[1]
    sources = [ModelSource(f"zoo:{name}", {}) for name in zoo_names()]
    sources.append(ModelSource(str(root / "examples/tracked-repository/models/mlp.onnx"), {}))
    for library in ("torchvision", "timm"):
        for name in filter(None, getattr(args, library).split(",")):
            sources.append(ModelSource(f"{library}:{name}", {"image": args.image}))

    checked = refused = skipped = 0
    for source in sources:
        network = build_network(source)
        for form, make in forms(network.mod):
            try:
                text = tvm.ir.save_json(make())
            except Exception:  # noqa: BLE001 - a form TVM cannot make is not the check's
                skipped += 1
                continue
            checked += 1
            try:
                check_module_json(text)
            except UnsafeModule as exc:
                refused += 1
                print(f"REFUSED {source.source} {form}: {exc}")
        print(f"{source.source}: done", flush=True)
    print(f"TVM {tvm.__version__}: {checked} modules checked, {refused} refused, "
          f"{skipped} forms TVM could not make")


if __name__ == "__main__":
    main()
