"""What a module handed over by a repository's process may hold, checked before TVM reads it.

The second process of a repository's compile (:mod:`planner.tvm.sources.handover`) builds the module
the first one wrote and runs its kernels. TVM's IR can reach outside the module in many ways:
a ``T.call_extern`` of ``system``, a packed function registered by the first process, a
shared library named in the module's ``external_mods``, a ``pragma_import_c`` that pastes C
source into the build, an ``ffi.Module`` or ``ffi.Function`` node, a target whose
host compiler flags are chosen by the module. A list of what is refused misses whatever TVM
adds next, so this is a list of what is allowed, drawn from what TVM's frontends and passes
emit for real networks (the zoo, ONNX files, torchvision and timm, before and after
legalisation and fusion, on CPU and CUDA targets, under TVM 0.26 and 0.27); anything else is
refused with its name:

- every node's type (``ffi.Module``, ``ffi.Function``, ``target.Target``, ``runtime.*`` ...
  are not among them), and the registered functions an ``ir.EnvFunc`` may name;
- every operator: Relax's tensor operators, but none that call a packed function, Relax's
  memory and VM operators, or TIR intrinsics other than arithmetic, math and thread
  primitives (no ``call_extern``, ``call_llvm_intrin``, ``address_of``, ``tvm_struct_set``,
  ``cuda.*``, ``ptx.*``);
- every ``ExternFunc``'s symbol: a few of the Relax VM's own shape and tuple helpers, and
  the paged KV cache's creation and attention calls that ``relax.frontend.nn.llm`` emits
  (an LLM deployment's functions call them through ``call_pure_packed`` and
  ``call_dps_packed``, which are allowed for that reason: whatever they call is an
  ``ExternFunc`` on this list, or a function of the module);
- the keys of function attributes, loop and block annotations and ``AttrStmt`` nodes; the
  module itself may carry no attributes;
- every function name (``global_symbol`` and global variables), which the micro board
  writes into C source: identifiers only.
"""

from __future__ import annotations

import json
import re
from typing import Any


class UnsafeModule(ValueError):
    """The module holds something Peakwatch does not build; the message names it."""


#: TVM 0.27 split ``tir`` into ``tirx`` and ``s_tir``; 0.25 and 0.26 write ``tir``.
_TIR_NAMESPACES = ("tir", "tirx", "s_tir")

_PLAIN_TYPES = {
    "DataType", "None", "bool", "int", "float",
    "ffi.String", "ffi.SmallStr", "ffi.Bytes", "ffi.SmallBytes", "ffi.Array", "ffi.Map",
    "ffi.Shape", "ffi.Tensor", "runtime.String", "runtime.NDArray", "runtime.ShapeTuple",
    "Array", "Map",
}
_IR_TYPES = {
    "Call", "DictAttrs", "FloatImm", "IntImm", "GenericConst", "Constant", "GlobalVar",
    "IRModule", "Op", "PrimType", "PointerType", "FuncType", "Range", "SourceMap", "Source",
    "SourceName", "Span", "SequentialSpan", "StringImm", "StringType", "TensorLoad", "EnvFunc",
    "TensorRegion", "Tuple", "TupleGetItem", "TupleType", "Var", "TupleAffineType",
}
#: Scalar expressions, written ``prim.*`` by 0.27 and ``tir.*`` before.
_PRIM_EXPRS = {
    "Add", "And", "Broadcast", "Cast", "Div", "EQ", "FloorDiv", "FloorMod", "GE", "GT", "LE",
    "LT", "Let", "Max", "Min", "Mod", "Mul", "NE", "Not", "Or", "Ramp", "Reduce", "Select",
    "Shuffle", "Sub", "Var", "SizeVar", "IntImm", "FloatImm", "StringImm", "Call",
    "BufferLoad", "ProducerLoad", "CommReducer", "Any", "LShift", "RShift", "BitwiseAnd",
    "BitwiseOr", "BitwiseXor",
}
_TIR_NODES = _PRIM_EXPRS | {
    "AllocBuffer", "Allocate", "AllocateConst", "AssertStmt", "AttrStmt", "Bind", "Block",
    "BlockRealize", "SBlock", "SBlockRealize", "Break", "Continue", "Buffer", "BufferRegion",
    "BufferRegionType", "BufferStore", "BufferType", "BufferRealize", "DeclBuffer",
    "Evaluate", "For", "IfThenElse", "IterVar", "LetStmt", "MatchBufferRegion", "PrimFunc",
    "SeqStmt", "While", "TileLayout", "Axis", "Iter", "IndexMap", "Layout", "BijectiveLayout",
}
_RELAX_TYPES = {
    "relax.AnyType", "relax.FuncType", "relax.ShapeType", "relax.TensorType",
    "relax.ObjectType", "relax.PackedFuncType", "relax.TupleType",
} | {
    f"relax.expr.{name}" for name in (
        "Binding", "BindingBlock", "Call", "Constant", "DataflowBlock", "DataflowVar",
        "ExternFunc", "Function", "If", "MatchCast", "PrimValue", "SeqExpr", "ShapeExpr",
        "StringImm", "DataTypeImm", "Tuple", "TupleGetItem", "Var", "VarBinding",
    )
} | {
    f"relax.{name}" for name in (
        "ShapeStructInfo", "TensorStructInfo", "TupleStructInfo", "FuncStructInfo",
        "ObjectStructInfo", "PrimStructInfo",
    )
}
#: Operator attribute nodes (``relax.attrs.Conv2DAttrs`` ...) carry numbers and layouts only.
_ALLOWED_TYPE_PREFIXES = ("relax.attrs.",)

#: Relax operators that call a closure or Python, or a packed function with the VM's
#: context. ``call_pure_packed`` and ``call_dps_packed`` are not here: the functions they
#: can reach are the ``ExternFunc`` symbols below.
_REFUSED_RELAX_OPS = {
    "call_builtin_with_ctx", "call_inplace_packed", "call_py_func", "invoke_closure",
    "invoke_pure_closure", "make_closure",
}
_RELAX_OP_NAMESPACES = {"nn", "image", "vision", "inspect", "grad"}
_PRIM_OPS = {"if_then_else", "likely", "ceil", "clz", "log2", "vscale"}
#: TIR intrinsics a kernel may use: arithmetic, math and the GPU's thread primitives.
_TIR_OPS = {
    "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "cos", "cosh", "sin", "sinh",
    "tan", "tanh", "exp", "exp2", "exp10", "erf", "log", "log2", "log10", "log1p", "sqrt",
    "rsqrt", "sigmoid", "pow", "fabs", "floor", "ceil", "round", "nearbyint", "trunc", "fma",
    "fmod", "ldexp", "copysign", "hypot", "nextafter", "isnan", "isinf", "isfinite",
    "isnullptr", "popcount", "ctpop", "clz", "reinterpret", "q_multiply_shift",
    "q_multiply_shift_per_axis", "assume", "likely", "if_then_else", "shift_left",
    "shift_right", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "abs",
    "tvm_thread_allreduce", "tvm_warp_shuffle", "tvm_warp_shuffle_up",
    "tvm_warp_shuffle_down", "tvm_warp_shuffle_xor", "tvm_warp_activemask",
    "tvm_storage_sync", "type_annotation", "tvm_tuple", "tvm_thread_invariant",
    "vectorhigh", "vectorlow", "vectorcombine", "undef", "ret", "break_loop",
    "continue_loop", "ignore_loop_partition",
}
#: The Relax VM's helpers a frontend may emit for shapes and tuples.
_EXTERN_SYMBOLS = {
    f"vm.builtin.{name}" for name in (
        "reshape", "shape_of", "copy", "null_value", "tuple_getitem", "make_shape",
        "match_shape", "check_tensor_info", "check_shape_info", "check_tuple_info",
        "check_prim_value_info", "check_func_info", "tensor_to_shape", "make_tuple",
    )
} | {
    # TVM's paged KV cache (relax.frontend.nn.llm.kv_cache): its creation, which takes the
    # module's own attention kernels as arguments, and the calls a model makes on it.
    "vm.builtin.paged_attention_kv_cache_create",
    *(f"vm.builtin.attention_kv_cache_{name}" for name in (
        "attention_with_fused_qkv", "self_attention", "cross_attention", "append_mla_kv",
        "merge_attn_output_inplace", "get_query_positions",
    )),
}
#: Registered functions a node may name: what TVM itself puts on an ``ExternFunc``'s type to
#: derive its result from the call's type arguments.
_ENV_FUNCS = {"tvm.relax.type.infer_by_ty_args", "tvm.relax.struct_info.infer_by_sinfo_args"}
_FUNCTION_ATTRS = {
    "global_symbol", "num_input", "op_pattern", "s_tir", "tirx", "tir", "tirx.noalias",
    "tir.noalias", "tirx.is_scheduled", "tir.is_scheduled", "tir_var_upper_bound",
    "tir_var_lower_bound", "relax.force_pure", "relax.rewrite_cuda_graph.capture_symbolic_vars",
    "tirx.has_reduction", "tir.has_reduction", "s_tir.is_scheduled", "layout_free_buffers",
    "dlight.tensorization", "relax.fused_func",
    # What pattern fusion marks its functions with (FuseTransposeMatmul, as MLC-LLM runs
    # it); with no "Codegen" key nothing hands them to an external compiler.
    "Composite", "Primitive",
}
_STMT_ATTR_KEYS = {
    "thread_extent", "virtual_thread", "pragma_auto_unroll_max_step", "pragma_unroll_explicit",
    "pragma_vectorize", "storage_alignment", "storage_scope", "reduce_scope",
    "buffer_bind_scope", "compute_scope", "realize_scope", "double_buffer_scope",
    "loop_scope", "volatile_scope", "device_scope",
}
_ANNOTATION_KEYS = _STMT_ATTR_KEYS | {
    "axis", "buffer_dim_align", "schedule_rule", "meta_schedule.auto_tensorize",
    "software_pipeline_stage", "software_pipeline_order", "software_pipeline_async_stages",
    "pragma_loop_partition_hint", "s_tir.is_scheduled", "warp_execution",
}
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,199}$")
#: TVM's JSON is a flat node list: anything deeper than this is not TVM's.
_MAX_DEPTH = 20


def check_module_json(text: str) -> str:
    """UnsafeModule unless every node of TVM's JSON ``text`` is on the lists above; the TVM
    version the JSON says wrote it ("" where it names none)."""
    graph = _parse(text)
    nodes = graph["nodes"]
    read = _Reader(nodes)
    modules = []
    for index, node in enumerate(nodes):
        kind, data = node["type"], node.get("data")
        if not _type_allowed(kind):
            raise UnsafeModule(
                f"the module holds a {kind[:200]} node, which Peakwatch does not build"
            )
        if kind == "ir.Op":
            _check_op(data)
        elif kind == "ir.EnvFunc" and data not in _ENV_FUNCS:
            raise UnsafeModule(f"the module names the registered function {str(data)[:200]!r}")
        elif kind == "relax.expr.ExternFunc":
            symbol = read.string(_field(data, "global_symbol"))
            if symbol not in _EXTERN_SYMBOLS:
                raise UnsafeModule(
                    f"the module calls the packed function {symbol[:200]!r}, which Peakwatch "
                    "does not run"
                )
        elif kind == "ir.DictAttrs":
            for key, value in read.mapping(_field(data, "__dict__")).items():
                if key not in _FUNCTION_ATTRS:
                    raise UnsafeModule(f"the module sets the function attribute {key[:200]!r}")
                if key == "global_symbol":
                    _check_name(read.string(value), "function symbol")
        elif kind == "ir.GlobalVar":
            _check_name(read.string(_field(data, "name_hint")), "function name")
        elif kind == "ir.IRModule":
            modules.append(index)
            attrs = _field(data, "attrs")
            if attrs is not None and read.kind(attrs) == "ir.DictAttrs":
                keys = list(read.mapping(_field(nodes[attrs].get("data"), "__dict__")))
                if keys:
                    raise UnsafeModule(f"the module sets the attribute {keys[0][:200]!r}")
        elif kind.endswith(".AttrStmt"):
            key = read.string(_field(data, "attr_key"))
            if key not in _STMT_ATTR_KEYS:
                raise UnsafeModule(f"a kernel holds the attribute {key[:200]!r}")
        if isinstance(data, dict) and "annotations" in data:
            for key in read.mapping(data["annotations"]):
                if key not in _ANNOTATION_KEYS:
                    raise UnsafeModule(f"a kernel holds the annotation {key[:200]!r}")
    if modules != [graph["root_index"]]:
        raise UnsafeModule("the module's JSON is not one IRModule")
    metadata = graph.get("metadata")
    version = metadata.get("tvm_version") if isinstance(metadata, dict) else None
    return version if isinstance(version, str) else ""


def _parse(text: str) -> dict:
    try:
        graph = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise UnsafeModule(f"the module is not JSON: {exc}") from None
    if not isinstance(graph, dict) or not isinstance(graph.get("nodes"), list):
        raise UnsafeModule("the module is not TVM's JSON (no node list)")
    nodes = graph["nodes"]
    root = graph.get("root_index")
    if not (isinstance(root, int) and 0 <= root < len(nodes)):
        raise UnsafeModule("the module is not TVM's JSON (no root node)")
    for node in nodes:
        if not isinstance(node, dict) or not isinstance(node.get("type"), str):
            raise UnsafeModule("the module is not TVM's JSON (a node without a type)")
        if _depth(node) > _MAX_DEPTH:
            raise UnsafeModule("the module is not TVM's JSON (a node nested too deeply)")
    return graph


def _depth(value: Any) -> int:
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth > _MAX_DEPTH:
            break
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return deepest


def _type_allowed(kind: str) -> bool:
    if kind in _PLAIN_TYPES or kind in _RELAX_TYPES or kind.startswith(_ALLOWED_TYPE_PREFIXES):
        return True
    namespace, _, name = kind.rpartition(".")
    if namespace == "ir":
        return name in _IR_TYPES
    if namespace == "prim":
        return name in _PRIM_EXPRS
    return namespace in _TIR_NAMESPACES and name in _TIR_NODES


def _check_op(name: Any) -> None:
    if not isinstance(name, str):
        raise UnsafeModule("the module holds an operator without a name")
    parts = name.split(".")
    allowed = False
    if parts[0] == "relax" and len(parts) == 2:
        allowed = parts[1] not in _REFUSED_RELAX_OPS
    elif parts[0] == "relax" and len(parts) == 3:
        allowed = parts[1] in _RELAX_OP_NAMESPACES
    elif parts[0] == "prim" and len(parts) == 2:
        allowed = parts[1] in _PRIM_OPS
    elif parts[0] in _TIR_NAMESPACES and len(parts) == 2:
        allowed = parts[1] in _TIR_OPS
    if not allowed:
        raise UnsafeModule(
            f"the module calls the operator {name[:200]}, which Peakwatch does not build "
            "(it can reach code outside the module)"
        )


def _check_name(name: str, what: str) -> None:
    if not _NAME.match(name):
        raise UnsafeModule(f"{what} {name[:200]!r} is not an identifier")


def _field(data: Any, name: str) -> Any:
    return data.get(name) if isinstance(data, dict) else None


class _Reader:
    """Strings and maps by node index, as TVM's JSON refers to them."""

    def __init__(self, nodes: list[dict]) -> None:
        self.nodes = nodes

    def kind(self, index: Any) -> str:
        if isinstance(index, int) and not isinstance(index, bool) and 0 <= index < len(self.nodes):
            return self.nodes[index]["type"]
        return ""

    def string(self, index: Any) -> str:
        if self.kind(index) in ("ffi.String", "ffi.SmallStr", "runtime.String"):
            data = self.nodes[index].get("data")
            if isinstance(data, str):
                return data
        raise UnsafeModule("the module names something with a node that is not a string")

    def mapping(self, index: Any) -> dict[str, Any]:
        if index is None:
            return {}
        if self.kind(index) not in ("ffi.Map", "Map"):
            raise UnsafeModule("the module's attributes are not a map")
        flat = self.nodes[index].get("data")
        if not isinstance(flat, list) or len(flat) % 2:
            raise UnsafeModule("the module's attributes are not a map")
        return {self.string(flat[i]): flat[i + 1] for i in range(0, len(flat), 2)}
