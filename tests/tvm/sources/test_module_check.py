"""The module a repository hands over holds only what real networks hold.

Every way out of the module that TVM 0.27 offers is built here with TVM's own APIs (or, for
nodes TVM will not put in a module it writes, spliced into its JSON) and must be refused by
name; real networks, before and after legalisation and fusion, must all pass.
"""

from __future__ import annotations

import json

import pytest

tvm = pytest.importorskip("tvm")
from tvm import relax  # noqa: E402
from tvm.script import tirx as T  # noqa: E402

from planner.tvm.sources import ModelSource, build_network  # noqa: E402
from planner.tvm.sources.handover import ImportedError, check_module  # noqa: E402
from planner.tvm.sources.module_check import UnsafeModule, check_module_json  # noqa: E402


def _kernel_module(body):
    """A one-kernel module whose kernel runs ``body(x, y)`` before copying x to y."""

    @T.prim_func
    def kernel(x: T.Buffer((4,), "float32"), y: T.Buffer((4,), "float32")):
        body(x, y)
        for i in range(4):
            y[i] = x[i]

    return _wrap(kernel)


def _wrap(kernel):
    builder = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((4,), "float32"))
    with builder.function("forward", [x]):
        kernel_var = builder.add_func(kernel, "kernel")
        with builder.dataflow():
            y = builder.emit_output(
                relax.call_tir(kernel_var, (x,), relax.TensorType((4,), "float32"))
            )
        builder.emit_func_output(y)
    return builder.get()


def _pragma_module():
    @T.prim_func
    def kernel(x: T.Buffer((4,), "float32"), y: T.Buffer((4,), "float32")):
        for i in T.serial(4, annotations={"pragma_import_c": "int evil(void) { return 0; }"}):
            y[i] = x[i]

    return _wrap(kernel)


def _attr_stmt_module():
    @T.prim_func
    def kernel(x: T.Buffer((4,), "float32"), y: T.Buffer((4,), "float32")):
        with T.attr(0, "pragma_import_llvm", "define void @evil() { ret void }"):
            for i in range(4):
                y[i] = x[i]

    return _wrap(kernel)


def _packed_module(symbol):
    """A Relax function that calls the packed function ``symbol`` directly, no operator."""
    builder = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((4,), "float32"))
    with builder.function("forward", [x]):
        y = builder.emit(relax.Call(
            relax.ExternFunc(symbol), [x], ty_args=[relax.TensorType((4,), "float32")]
        ))
        builder.emit_func_output(y)
    return builder.get()


def _spliced(mod, node):
    """``mod``'s JSON with ``node`` appended (the checker reads every node, referenced or not)."""
    graph = json.loads(tvm.ir.save_json(mod))
    graph["nodes"].append(node)
    return json.dumps(graph)


HOSTILE = {
    "call_extern": lambda: _kernel_module(
        lambda x, y: T.evaluate(T.call_extern("int32", "system", "cat /etc/hostname"))
    ),
    "call_pure_extern": lambda: _kernel_module(
        lambda x, y: T.evaluate(T.call_pure_extern("int32", "getpid"))
    ),
    "call_llvm_intrin": lambda: _kernel_module(
        lambda x, y: T.evaluate(T.call_llvm_intrin("int32", "llvm.trap"))
    ),
    "address_of": lambda: _kernel_module(lambda x, y: T.evaluate(T.address_of(x[0]))),
    "tvm_call_packed": lambda: _kernel_module(
        lambda x, y: T.evaluate(T.call_packed("runtime.module.loadfile_so", "/tmp/x.so"))
    ),
    "pragma_import_c": _pragma_module,
    "pragma_import_llvm": _attr_stmt_module,
    "invoke_debug_func": lambda: _packed_module("vm.builtin.invoke_debug_func"),
    "runtime.module.loadfile_so": lambda: _packed_module("runtime.module.loadfile_so"),
    "system_lib_prefix": lambda: build_network(
        ModelSource("zoo:mlp", {})
    ).mod.with_attr("system_lib_prefix", "evil_"),
    "external_mods": lambda: _kernel_module(lambda x, y: None).with_attr(
        "external_mods", ["evil"]
    ),
}


def _bad_symbol_module():
    mod = _kernel_module(lambda x, y: None)
    name = next(gv for gv in mod.get_global_vars() if gv.name_hint == "kernel")
    mod[name] = mod[name].with_attr("global_symbol", "k(void); int main(")
    return mod


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_every_way_out_of_the_module_is_refused_by_name(name):
    text = tvm.ir.save_json(HOSTILE[name]())
    with pytest.raises(UnsafeModule) as refused:
        check_module_json(text)
    assert name in str(refused.value)


def test_a_function_symbol_that_is_not_an_identifier_is_refused():
    # The micro board writes function symbols into C source.
    with pytest.raises(UnsafeModule, match="is not an identifier"):
        check_module_json(tvm.ir.save_json(_bad_symbol_module()))


@pytest.mark.parametrize(
    "node, message",
    [
        ({"type": "ffi.Module", "data": {}}, "ffi.Module"),
        ({"type": "ffi.Function", "data": {}}, "ffi.Function"),
        ({"type": "target.Target", "data": {}}, "target.Target"),
        ({"type": "ir.EnvFunc", "data": "runtime.module.loadfile_so"}, "loadfile_so"),
    ],
)
def test_nodes_that_hold_code_or_a_target_are_refused(node, message):
    honest = build_network(ModelSource("zoo:mlp", {})).mod
    with pytest.raises(UnsafeModule, match=message):
        check_module_json(_spliced(honest, node))


def test_the_runtimes_own_helpers_may_be_called():
    check_module_json(tvm.ir.save_json(_packed_module("vm.builtin.copy")))


@pytest.mark.parametrize("operator", [relax.call_dps_packed, relax.call_pure_packed])
def test_packed_calls_reach_only_the_listed_functions(operator):
    # An LLM deployment calls its KV cache through these operators; what they call is
    # still checked by name.
    builder = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((4,), "float32"))
    out = relax.TensorType((4,), "float32")
    with builder.function("forward", [x]):
        args = (x, out) if operator is relax.call_dps_packed else (x,)
        kwargs = {} if operator is relax.call_dps_packed else {"ty_args": out}
        y = builder.emit(operator("runtime.module.loadfile_so", *args, **kwargs))
        builder.emit_func_output(y)
    with pytest.raises(UnsafeModule, match="loadfile_so"):
        check_module_json(tvm.ir.save_json(builder.get()))


@pytest.mark.parametrize(
    "text, message",
    [
        ("[", "not JSON"),
        ('{"nodes": 3}', "no node list"),
        ('{"root_index": 5, "nodes": []}', "no root node"),
        ('{"root_index": 0, "nodes": [{"data": 1}]}', "a node without a type"),
        ('{"root_index": 0, "nodes": [{"type": "int", "data": ' + "[" * 50 + "]" * 50 + "}]}",
         "nested too deeply"),
        ('{"root_index": 0, "nodes": [{"type": "int", "data": 1}]}', "not one IRModule"),
    ],
)
def test_what_is_not_tvms_json_is_refused(text, message):
    with pytest.raises(UnsafeModule, match=message):
        check_module_json(text)


def test_the_loader_says_why_in_its_own_error():
    with pytest.raises(ImportedError, match="tirx.call_extern"):
        check_module(tvm.ir.save_json(HOSTILE["call_extern"]()))


@pytest.mark.parametrize("source, params", [
    ("zoo:small_cnn", {}), ("zoo:bert_tiny", {}), ("zoo:int8_vgg", {}),
    ("torchvision:resnet18", {"image": 32}),
])
@pytest.mark.parametrize("target", ["llvm", "cuda"])
def test_real_networks_pass_before_and_after_fusion(source, params, target):
    from planner.tvm.plan.lowering import _backend

    mod = build_network(ModelSource(source, params)).mod
    check_module_json(tvm.ir.save_json(mod))
    target = tvm.target.Target(target)
    backend = _backend(target)
    with target:
        legalized = tvm.transform.Sequential(
            backend.library_dispatch_passes(target) + backend.legalize_passes(target)
        )(mod)
        fused = tvm.transform.Sequential([
            relax.transform.LegalizeOps(), relax.transform.AnnotateTIROpPattern(),
            relax.transform.FoldConstant(), relax.transform.FuseOps(),
            relax.transform.FuseTIR(),
        ])(mod)
    check_module_json(tvm.ir.save_json(legalized))
    check_module_json(tvm.ir.save_json(fused))
