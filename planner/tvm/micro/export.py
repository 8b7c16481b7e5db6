"""Write a planned model as a self-contained C project: kernels, weights, one static arena.

The kernels are what TVM generates for target ``c``. TVM 0.27 has no AOT executor and no
unpacked calling convention any more: every generated kernel is a tvm-ffi packed function,
``int32_t __tvm_ffi_NAME(void *self, TVMFFIAny *args, int32_t num_args, void *result)``
whose arguments are ``DLTensor`` pointers. The driver written here plays the VM's part: it
walks the planned Relax function binding by binding and calls each kernel with
descriptors whose data pointers sit at the planned offsets inside ``peakwatch_arena``. The
descriptors and argument arrays are ``const`` (flash); only those pointing into the
caller's input and output buffers are patched at run time.

Nothing of TVM's runtime is linked: ``runtime/peakwatch_tvm.h`` declares the types the
kernels read, and ``runtime/board_runtime.c`` serves the workspace requests kernels still
make (temporaries the plan did not lift) from a fixed region sized here, from the kernels'
own requests.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import tvm
from tvm import relax

from planner.tvm.micro.boards import Board, get_board
from planner.tvm.micro.build import ARM_SOURCES, HOST_SOURCES, arm_command, host_command
from planner.tvm.micro.plan import (
    MicroPlanError,
    PlannedModel,
    example_inputs,
    plan_models,
)
from planner.tvm.network import static_tensor_type
from planner.tvm.plan.extract import align, bindings_of
from planner.tvm.sources import ModelSource, build_network

RUNTIME_DIR = Path(__file__).with_name("runtime")
RUNTIME_FILES = ("peakwatch_tvm.h", "board_runtime.c", "main.c", "startup_cortex_m.c")
PROJECT_FILES = (
    "kernels.c", "weights.c", "model.c", "model.h", "input.bin", "board.ld", "Makefile",
)

#: tvm-ffi's type index for a borrowed ``DLTensor *`` argument.
_DLTENSOR_PTR = 7

_ALLOC_STORAGE = tvm.ir.Op.get("relax.memory.alloc_storage")
_ALLOC_TENSOR = tvm.ir.Op.get("relax.memory.alloc_tensor")
_BUILTIN_ALLOC = tvm.ir.Op.get("relax.builtin.alloc_tensor")
_ALIASES = {tvm.ir.Op.get("relax.reshape"), tvm.ir.Op.get("relax.memory.ensure_zero_offset")}


class ExportError(ValueError):
    """The planned function uses something the C driver cannot express."""


@dataclass
class TensorLayout:
    shape: list[int]
    dtype: str
    offset: int
    size: int


@dataclass
class ExportedProject:
    """What an export wrote and what it needs; ``to_json`` is ``export.json`` in the folder."""

    directory: Path
    model: str
    strategy: str
    board: str
    arena_bytes: int
    #: The fixed region serving the workspace requests kernels still make.
    workspace_bytes: int
    weights_bytes: int
    input: TensorLayout
    outputs: list[TensorLayout]
    output_bytes: int
    kernel_calls: int
    lifted_temporaries: bool
    files: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        data = asdict(self)
        data["directory"] = str(self.directory)
        return data


def export_c(
    source: ModelSource,
    strategy: str,
    out_dir: str | Path,
    *,
    board: str | Board = "stm32f746",
    seed: int = 0,
    base_dir: str | Path | None = None,
) -> ExportedProject:
    """Plan ``source`` with ``strategy`` and write its C project into ``out_dir``.

    The weights and the example input (``input.bin``) are those the host check uses, drawn
    with ``seed``. Raises :class:`MicroPlanError` or :class:`ExportError` when the model
    cannot be exported under that strategy.
    """
    spec = get_board(board)
    network = build_network(source, base_dir=Path(base_dir) if base_dir else None)
    planned = plan_models(network, [strategy], spec.tvm_target(), seed=seed)[strategy]
    if isinstance(planned, MicroPlanError):
        raise planned
    return write_project(planned, out_dir, example_inputs(network, seed), spec)


def write_project(
    planned: PlannedModel, out_dir: str | Path, inputs: list[np.ndarray], board: Board
) -> ExportedProject:
    """Write the C project of an already planned model; ``inputs`` give weights and input."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    driver = _walk(planned)
    kernel_source = _kernel_source(planned, driver.kernels, board)
    symbols = _kernel_symbols(kernel_source, driver.kernels)
    workspace = workspace_need(kernel_source)
    weights = {i: np.ascontiguousarray(inputs[i]) for i in driver.weights}
    input_value = np.ascontiguousarray(inputs[0])

    (out / "kernels.c").write_text(kernel_source)
    (out / "weights.c").write_text(_weights_c(weights))
    (out / "model.c").write_text(_model_c(driver, symbols))
    (out / "model.h").write_text(_model_h(planned, driver, workspace, input_value.nbytes))
    (out / "input.bin").write_bytes(input_value.tobytes())
    for name in RUNTIME_FILES:
        shutil.copyfile(RUNTIME_DIR / name, out / name)
    (out / "board.ld").write_text(board.linker_script())
    (out / "Makefile").write_text(_makefile(board))

    project = ExportedProject(
        directory=out,
        model=planned.network.name,
        strategy=planned.strategy,
        board=board.name,
        arena_bytes=driver.arena_bytes,
        workspace_bytes=workspace,
        weights_bytes=sum(w.nbytes for w in weights.values()),
        input=TensorLayout(list(input_value.shape), str(input_value.dtype), 0, input_value.nbytes),
        outputs=driver.outputs,
        output_bytes=driver.output_bytes,
        kernel_calls=len(driver.calls),
        lifted_temporaries=planned.lifted,
        files=sorted([*PROJECT_FILES, *RUNTIME_FILES, "export.json"]),
    )
    (out / "export.json").write_text(json.dumps(project.to_json(), indent=2) + "\n")
    return project


# --- walking the planned function -------------------------------------------------------


@dataclass(frozen=True)
class _Loc:
    """Where a tensor's bytes are: ``base`` is arena, input, weight:N, or out:N (pending)."""

    base: str
    offset: int = 0


@dataclass(frozen=True)
class _Descriptor:
    loc: _Loc
    shape: tuple[int, ...]
    dtype: str


@dataclass
class _Driver:
    arena_bytes: int = 0
    calls: list[tuple[str, list[_Descriptor]]] = field(default_factory=list)
    kernels: list[str] = field(default_factory=list)
    weights: list[int] = field(default_factory=list)
    outputs: list[TensorLayout] = field(default_factory=list)
    output_bytes: int = 0
    #: Returned tensors that live elsewhere (a weight, an arena tensor): copied at the end.
    copies: list[tuple[_Loc, int, int]] = field(default_factory=list)
    #: Pending output allocations: ``out:N`` -> offset in the caller's output buffer.
    output_offsets: dict[str, int] = field(default_factory=dict)


def _tensor_type(var: relax.Var, where: str) -> tuple[tuple[int, ...], str]:
    try:
        return static_tensor_type(var, f"{where}: {var.name}")
    except ValueError as exc:
        raise ExportError(str(exc)) from None


def _nbytes(shape: tuple[int, ...], dtype: str) -> int:
    dt = tvm.DataType(dtype)
    return int(np.prod(shape, dtype=np.int64)) * ((dt.bits * dt.lanes + 7) // 8)


def _walk(planned: PlannedModel) -> _Driver:
    func = planned.module[planned.extraction.function]
    params = list(func.params)
    if not params:
        raise ExportError("the model takes no input")
    loc: dict[relax.Var, _Loc] = {params[0]: _Loc("input")}
    for index, param in enumerate(params[1:], start=1):
        loc[param] = _Loc(f"weight:{index}")
    tuples: dict[relax.Var, list[relax.Expr]] = {}
    storage_base: dict[relax.Var, int] = {}
    driver = _Driver()
    kernel_names = {gv.name_hint for gv in planned.finished.functions}
    pending = 0
    used_weights: set[int] = set()

    def location(expr: relax.Expr, where: str) -> _Loc:
        if not isinstance(expr, relax.Var) or expr not in loc:
            raise ExportError(f"{where}: argument {expr} is not a tensor the driver placed")
        found = loc[expr]
        if found.base.startswith("weight:"):
            used_weights.add(int(found.base.split(":")[1]))
        return found

    for index, binding in enumerate(bindings_of(func)):
        where = f"binding {index}"
        if not isinstance(binding, relax.VarBinding):
            raise ExportError(f"{where}: match_cast is not supported")
        var, value = binding.var, binding.value
        if isinstance(value, relax.Var):
            if value in tuples:
                tuples[var] = tuples[value]
            else:
                loc[var] = location(value, where)
            continue
        if isinstance(value, relax.Tuple):
            tuples[var] = list(value.fields)
            continue
        if isinstance(value, relax.TupleGetItem):
            fields = tuples.get(value.tuple_value)
            if fields is None:
                raise ExportError(f"{where}: item of a tuple the driver does not know")
            loc[var] = location(fields[value.index], where)
            continue
        if not isinstance(value, relax.Call):
            raise ExportError(f"{where}: unsupported binding {type(value).__name__}")
        op = value.op
        if op == _ALLOC_STORAGE:
            size = int(value.args[0].values[0])
            # Storages laid end to end: for TVM's planner the same layout stock_offsets
            # reports; ours make exactly one.
            storage_base[var] = driver.arena_bytes
            driver.arena_bytes += align(size)
        elif op == _ALLOC_TENSOR:
            storage = value.args[0]
            if storage not in storage_base:
                raise ExportError(f"{where}: tensor in an unknown storage")
            loc[var] = _Loc("arena", storage_base[storage] + int(value.args[1].value))
        elif op == _BUILTIN_ALLOC:
            # Left unplanned: an output, placed in the caller's buffer once the return
            # value says in which order.
            loc[var] = _Loc(f"out:{pending}")
            pending += 1
        elif op in _ALIASES:
            loc[var] = location(value.args[0], where)
        elif isinstance(op, relax.GlobalVar):
            prim = planned.finished[op.name_hint] if op.name_hint in kernel_names else None
            if not isinstance(prim, tvm.tirx.PrimFunc):
                raise ExportError(f"{where}: {op.name_hint} is not a TIR kernel")
            args = []
            for arg in value.args:
                if isinstance(arg, relax.Tuple):
                    raise ExportError(f"{where}: tuple argument to {op.name_hint}")
                shape, dtype = _tensor_type(arg, where)
                args.append(_Descriptor(location(arg, where), shape, dtype))
            driver.calls.append((op.name_hint, args))
            if op.name_hint not in driver.kernels:
                driver.kernels.append(op.name_hint)
        else:
            raise ExportError(f"{where}: the driver cannot call {op}")

    offset = 0
    for leaf in _leaves(func.body.body, tuples):
        if not isinstance(leaf, relax.Var) or leaf not in loc:
            raise ExportError(f"the return value {leaf} is not a placed tensor")
        shape, dtype = _tensor_type(leaf, "return")
        size = _nbytes(shape, dtype)
        found = loc[leaf]
        if found.base.startswith("out:") and found.base not in driver.output_offsets:
            driver.output_offsets[found.base] = offset
        else:
            driver.copies.append((location(leaf, "return"), offset, size))
        driver.outputs.append(TensorLayout(list(shape), dtype, offset, size))
        offset = align(offset + size)
    unplaced = [
        base for base in {d.loc.base for _, args in driver.calls for d in args}
        if base.startswith("out:") and base not in driver.output_offsets
    ]
    if unplaced:
        raise ExportError(f"{len(unplaced)} tensors were left unplanned and are not outputs")
    driver.output_bytes = max((o.offset + o.size for o in driver.outputs), default=0)
    driver.weights = sorted(used_weights)
    return driver


def _leaves(expr: relax.Expr, tuples: dict) -> list[relax.Expr]:
    if isinstance(expr, relax.Tuple):
        return [leaf for item in expr.fields for leaf in _leaves(item, tuples)]
    if isinstance(expr, relax.Var) and expr in tuples:
        return [leaf for item in tuples[expr] for leaf in _leaves(item, tuples)]
    return [expr]


# --- kernels ------------------------------------------------------------------------------


def _kernel_source(planned: PlannedModel, kernels: list[str], board: Board) -> str:
    functions = {
        gv: func
        for gv, func in planned.finished.functions.items()
        if gv.name_hint in kernels and isinstance(func, tvm.tirx.PrimFunc)
    }
    # Argument checks cost flash (every kernel spells its whole signature in each
    # message); the driver passes exactly the descriptors the kernels were built for.
    with tvm.transform.PassContext(config={"tirx.disable_assert": True}):
        built = tvm.tirx.build(tvm.IRModule(functions), board.tvm_target())
    source = built.inspect_source()
    lines = [
        line for line in source.splitlines()
        if not line.startswith('#include "tvm/') and line.strip() != "#define TVM_EXPORTS"
    ]
    header = (
        f"/* Kernels generated by TVM {tvm.__version__} for {board.tvm_target()}.\n"
        " * TVM's headers are replaced by peakwatch_tvm.h: no TVM runtime is linked. */\n"
        '#include "peakwatch_tvm.h"\n'
    )
    return header + "\n".join(lines) + "\n"


_DEFINITION = re.compile(r"^TVM_DLL int32_t (\w+)\(void\* self_handle.*\{\s*$", re.M)


def _kernel_symbols(source: str, kernels: list[str]) -> dict[str, str]:
    defined = set(_DEFINITION.findall(source))
    symbols = {}
    for name in kernels:
        for candidate in (f"__tvm_ffi_{name}", name):
            if candidate in defined:
                symbols[name] = candidate
                break
        else:
            raise ExportError(f"TVM generated no C function for kernel {name}")
    return symbols


_ALLOC_CALL = re.compile(
    r"(\w+) = .*TVMBackendAllocWorkspace\(\d+, \w+, \(uint64_t\)(\d+)ULL"
)
_FREE_CALL = re.compile(r"TVMBackendFreeWorkspace\(\d+, \w+, (\w+)\)")


def workspace_need(source: str) -> int:
    """The workspace region the kernels need: the most any one kernel holds at once.

    Generated kernels allocate and free in nested scopes, so the source order of the
    requests inside a function is the order they are live in; kernels run one at a time.
    Each request is rounded up to the allocator's 64-byte alignment.
    """
    need = 0
    for body in re.split(r"^TVM_DLL ", source, flags=re.M)[1:]:
        live: dict[str, list[int]] = {}
        held = 0
        for line in body.splitlines():
            if "TVMBackendAllocWorkspace" in line:
                match = _ALLOC_CALL.search(line)
                if match is None:
                    raise ExportError(f"workspace request of unknown size: {line.strip()}")
                size = align(int(match.group(2)))
                live.setdefault(match.group(1), []).append(size)
                held += size
                need = max(need, held)
            elif "TVMBackendFreeWorkspace" in line:
                match = _FREE_CALL.search(line)
                if match and live.get(match.group(1)):
                    held -= live[match.group(1)].pop()
    return need


# --- writing C ----------------------------------------------------------------------------


def _weights_c(weights: dict[int, np.ndarray]) -> str:
    out = [
        "/* The model's parameters as const arrays: the linker puts them in flash. */",
        "#include <stdint.h>",
        "",
    ]
    for index, value in weights.items():
        data = value.tobytes()
        out.append(
            f"/* parameter {index}: {list(value.shape)} {value.dtype} */\n"
            f"const uint8_t peakwatch_weight_{index}[{max(1, len(data))}] "
            "__attribute__((aligned(64))) = {"
        )
        for start in range(0, len(data), 24):
            out.append("  " + ",".join(str(b) for b in data[start : start + 24]) + ",")
        out.append("};\n")
    return "\n".join(out)


def _pointer(loc: _Loc, driver: _Driver) -> tuple[str, bool]:
    """C expression of a descriptor's data pointer, and whether it is known at link time."""
    if loc.base == "arena":
        return f"peakwatch_arena + {loc.offset}", True
    if loc.base.startswith("weight:"):
        return f"(uint8_t *)peakwatch_weight_{loc.base.split(':')[1]} + {loc.offset}", True
    if loc.base == "input":
        return f"(uint8_t *)input + {loc.offset}", False
    return f"(uint8_t *)output + {driver.output_offsets[loc.base] + loc.offset}", False


def _model_c(driver: _Driver, symbols: dict[str, str]) -> str:
    descriptors: dict[_Descriptor, int] = {}
    for _, args in driver.calls:
        for arg in args:
            descriptors.setdefault(arg, len(descriptors))
    out = [
        "/* The planned model: every kernel called in order, every tensor at its planned",
        " * offset in one static arena. Generated by Peakwatch. */",
        "#include <string.h>",
        '#include "peakwatch_tvm.h"',
        '#include "model.h"',
        "",
    ]
    for index in driver.weights:
        out.append(f"extern const uint8_t peakwatch_weight_{index}[];")
    for symbol in sorted(set(symbols.values())):
        out.append(f"int32_t {symbol}(void *self, void *args, int32_t num_args, void *result);")
    out += [
        "",
        "uint8_t peakwatch_arena[PEAKWATCH_ARENA_BYTES > 0 ? PEAKWATCH_ARENA_BYTES : 1]"
        " __attribute__((aligned(64)));",
        "",
    ]
    patched = []
    for desc, index in descriptors.items():
        dt = tvm.DataType(desc.dtype)
        shape = ", ".join(str(d) for d in desc.shape) or "1"
        out.append(f"static const int64_t peakwatch_shape_{index}[] = {{{shape}}};")
        pointer, constant = _pointer(desc.loc, driver)
        fields = (
            f"{{{pointer if constant else 'NULL'}, {{1, 0}}, {len(desc.shape)}, "
            f"{{{dt.type_code}, {dt.bits}, {dt.lanes}}}, (int64_t *)peakwatch_shape_{index}, "
            "NULL, 0}"
        )
        if constant:
            out.append(f"static const DLTensor peakwatch_tensor_{index} = {fields};")
        else:
            out.append(f"static DLTensor peakwatch_tensor_{index} = {fields};")
            patched.append((index, pointer))
    out.append("")
    for number, (_, args) in enumerate(driver.calls):
        items = ", ".join(
            f"{{{_DLTENSOR_PTR}, 0, {{.v_ptr = (void *)&peakwatch_tensor_{descriptors[a]}}}}}"
            for a in args
        )
        out.append(f"static const TVMFFIAny peakwatch_call_{number}[] = {{{items}}};")
    out += ["", "int peakwatch_run(const void *input, void *output)", "{"]
    if not patched:
        out += ["    (void)input;", "    (void)output;"]
    for index, pointer in patched:
        out.append(f"    peakwatch_tensor_{index}.data = {pointer};")
    for number, (kernel, args) in enumerate(driver.calls):
        out.append(
            f"    if ({symbols[kernel]}(NULL, (void *)peakwatch_call_{number}, {len(args)}, "
            f"NULL) != 0) {{"
        )
        out.append(f"        return {100 + number}; /* {kernel} failed */")
        out.append("    }")
    for loc, offset, size in driver.copies:
        pointer, _ = _pointer(loc, driver)
        out.append(f"    memcpy((uint8_t *)output + {offset}, {pointer}, {size});")
    out += ["    return 0;", "}", ""]
    return "\n".join(out)


def _model_h(planned: PlannedModel, driver: _Driver, workspace: int, input_bytes: int) -> str:
    return "\n".join([
        f"/* {planned.network.name} planned with {planned.strategy}. Generated by Peakwatch. */",
        "#ifndef PEAKWATCH_MODEL_H",
        "#define PEAKWATCH_MODEL_H",
        f"#define PEAKWATCH_ARENA_BYTES {driver.arena_bytes}",
        f"#define PEAKWATCH_WORKSPACE_BYTES {workspace}",
        f"#define PEAKWATCH_INPUT_BYTES {input_bytes}",
        f"#define PEAKWATCH_OUTPUT_BYTES {max(1, driver.output_bytes)}",
        "#endif",
        "",
    ])


def _makefile(board: Board) -> str:
    arm = " ".join(arm_command(board, "model.elf"))
    host = " ".join(host_command("model_host"))
    return (
        f"# Build for the {board.name} ({board.machine} in QEMU) and for this host.\n"
        f"all: model.elf model_host\n\n"
        f"model.elf: {' '.join(ARM_SOURCES)} model.h peakwatch_tvm.h board.ld\n\t{arm}\n\n"
        f"model_host: {' '.join(HOST_SOURCES)} model.h peakwatch_tvm.h\n\t{host}\n\n"
        f"run: model.elf\n\t{' '.join(board.qemu_command('model.elf'))}\n\n"
        ".PHONY: all run\n"
    )
