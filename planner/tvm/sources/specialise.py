"""Export that specialises a data-dependent guard where it must, and says so.

``torch.export`` refuses a branch on a tensor's value (``if cache_position[0] > 0:``,
``GuardOnDataDependentSymNode``), though for many models the branch goes the same way for
any input the deployment will see: ``cache_position`` is an ``arange`` when no cache is
passed. ``torch.export.draft_export`` exports anyway, taking each such branch the way the
example took it and recording the guard (its expression, the value it took, the file and
line). Where :func:`torch.export.export` failed on such a guard and draft_export's report
holds nothing but such guards, the draft is kept:

- every guard becomes an assumption of the Result, with its line and value;
- the runtime asserts draft_export inserted for them are dropped (TVM has no operators for
  them, and they would only re-check the example's branch), with what only they used;
- the specialised program is run against the model on inputs drawn differently from the
  example (two draws: integers over the example's range, floats with its mean and spread;
  and the example mirrored: floats negated, integers reflected within their range, booleans
  flipped, which sends a branch on a sign or a threshold the other way): an output that
  changes means a guard went another way there, and the model is refused, naming the
  guards. A branch no such input reaches is not found, which the assumption says.

Anything else draft_export reports (a fake kernel that differs, a constraint violated) is
not specialised: the original export failure stands.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

#: Words of torch's data-dependent failures, in whichever exception of the chain says them.
_DATA_DEPENDENT = re.compile(
    r"GuardOnDataDependentSymNode|Could not guard on data-dependent|data-dependent expression"
    r"|Could not extract specialized integer from data-dependent"
)
#: draft_export's word for the failures it may specialise.
DATA_DEPENDENT_ERROR = "DATA_DEPENDENT_ERROR"
#: How far another input's output may drift from the model's and still be "the same":
#: the specialised program runs the same operators in the same order, so only a branch
#: taken differently moves it past this.
SAME_RTOL, SAME_ATOL = 1e-4, 1e-5


class SpecialiseError(ValueError):
    """The draft cannot stand: another kind of failure, or a guard that changes the output."""


@dataclass(frozen=True)
class Guard:
    """One branch taken the way the example took it."""

    expression: str  # torch's symbolic form, Eq(u0, 1)
    value: str  # what it evaluated to on the example
    file: str  # relative to site-packages for a library
    line: int
    function: str
    code: str  # the source line

    def assumption(self) -> str:
        return (
            f"torch.export specialised a data-dependent branch to the example's: "
            f"{self.code.strip()!r} ({self.file}:{self.line} in {self.function}; "
            f"{self.expression} took {self.value}); inputs drawn differently and the "
            "example mirrored gave PyTorch's output, a branch none of them reaches is not "
            "checked"
        )

    def place(self) -> str:
        return f"{self.code.strip()!r} at {self.file}:{self.line} in {self.function}"


def is_data_dependent(exc: BaseException) -> bool:
    """Whether ``exc`` (or an exception it came from) is torch's data-dependent guard."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if _DATA_DEPENDENT.search(f"{type(exc).__name__}: {exc}"):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def draft_exported(module, example_inputs: tuple, dynamic_shapes=None):
    """``module`` exported by draft_export, its guards' asserts dropped, and its guards;
    :class:`SpecialiseError` where draft_export reports anything but data-dependent guards
    or another input shows a guard changes the output."""
    import torch

    exported = torch.export.draft_export(
        module, example_inputs, dynamic_shapes=dynamic_shapes, strict=False
    )
    report = getattr(exported, "_report", None)
    failures = list(getattr(report, "failures", ()) or ())
    other = [f for f in failures if _kind(f) != DATA_DEPENDENT_ERROR]
    if other:
        raise SpecialiseError(
            "draft_export found more than data-dependent branches: "
            + "; ".join(sorted({_kind(f) for f in other}))
        )
    files = dict(getattr(report, "str_to_filename", {}) or {})
    guards = [_guard(f, files) for f in failures]
    _drop_asserts(exported)
    _same_on_second_input(module, exported, example_inputs, guards)
    return exported, guards


def _kind(failure) -> str:
    kind = getattr(failure, "failure_type", "")
    return getattr(kind, "name", str(kind))


def _guard(failure, files: dict) -> Guard:
    data = getattr(failure, "data", {}) or {}
    stack = data.get("user_stack") or [{}]
    frame = stack[-1] if isinstance(stack, list) and stack else {}
    file = files.get(frame.get("filename"), str(frame.get("filename", "?")))
    return Guard(
        expression=str(data.get("expr", "?")),
        value=str(data.get("result", "?")),
        file=_short(file),
        line=int(frame.get("line", 0) or 0),
        function=str(frame.get("name", "?")),
        code=str(frame.get("loc", "") or (data.get("frame_locals") or {}).get("loc", "")),
    )


def _short(path: str) -> str:
    """A library's file relative to its site-packages, as a user finds it online; a file of
    the checkout relative to it."""
    parts = Path(path).parts
    if "site-packages" in parts:
        return str(Path(*parts[parts.index("site-packages") + 1:]))
    try:
        return str(Path(path).relative_to(Path.cwd()))
    except ValueError:
        return path


def _drop_asserts(exported) -> None:
    """Remove the scalar asserts (the guards, re-checked at run time) and whatever only
    they used (the ``.item()`` that read the value)."""
    import torch

    graph = exported.graph_module.graph
    for node in list(graph.nodes):
        if node.op == "call_function" and node.target in (
            torch.ops.aten._assert_scalar.default,
            torch.ops.aten.sym_constrain_range_for_size.default,
        ):
            graph.erase_node(node)
    graph.eliminate_dead_code()
    exported.graph_module.recompile()


#: Seeds of the drawn inputs the specialised program is checked on (see the docstring).
DRAWS = (1, 2)


def other_inputs(example_inputs: tuple) -> list[tuple]:
    """The inputs a specialised program is checked on: :data:`DRAWS` draws, then the
    example mirrored."""
    return [*(second_input(example_inputs, seed) for seed in DRAWS),
            mirrored(example_inputs)]


def mirrored(example_inputs: tuple) -> tuple:
    """Floats negated, integers reflected within their range, booleans flipped."""
    import torch

    out = []
    for x in example_inputs:
        if not isinstance(x, torch.Tensor) or x.numel() == 0:
            out.append(x)
        elif x.dtype == torch.bool:
            out.append(~x)
        elif x.is_floating_point():
            out.append(-x)
        else:
            out.append(x.max() + x.min() - x)
    return tuple(out)


def second_input(example_inputs: tuple, seed: int = 1) -> tuple:
    """An input drawn differently from ``example_inputs``: integers uniform over each
    example's range, floats with its mean and spread, booleans with its share of True."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    drawn = []
    for x in example_inputs:
        if not isinstance(x, torch.Tensor) or x.numel() == 0:
            drawn.append(x)
        elif x.dtype == torch.bool:
            share = x.float().mean().item()
            drawn.append(torch.rand(x.shape, generator=generator) < share)
        elif x.is_floating_point():
            mean, spread = x.float().mean(), x.float().std() if x.numel() > 1 else 1.0
            values = torch.randn(x.shape, generator=generator) * spread + mean
            drawn.append(values.to(x.dtype))
        else:
            low, high = int(x.min()), int(x.max())
            drawn.append(
                torch.randint(low, high + 1, x.shape, generator=generator, dtype=x.dtype)
            )
    return tuple(drawn)


def _same_on_second_input(module, exported, example_inputs: tuple, guards: list[Guard]) -> None:
    # The example first: draft_export's own evaluation of a guard can go another way than
    # the model's forward on the example (seen on a branch over a linear layer's output).
    _same_on(module, exported, example_inputs, guards, where="the example itself")
    for again in other_inputs(example_inputs):
        _same_on(module, exported, again, guards)


def _same_on(module, exported, again: tuple, guards: list[Guard],
             where: str = "another input") -> None:
    import torch

    with torch.no_grad():
        expected = module(*again)
        try:
            got = exported.module()(*again)
        except Exception as exc:  # an assert draft_export kept, a shape a guard fixed, or torch
            first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
            raise SpecialiseError(
                "torch could not run the specialised program on another input, so the "
                f"specialisation of {'; '.join(g.place() for g in guards) or 'its branches'} "
                f"cannot be checked ({type(exc).__name__}: {first})"
            ) from exc
    expected_leaves = list(_leaves(expected))
    got_leaves = list(_leaves(got))
    if len(expected_leaves) != len(got_leaves):
        raise SpecialiseError(_changed(guards, "its outputs differ in number", where))
    for want, have in zip(expected_leaves, got_leaves, strict=True):
        if want.shape != have.shape:
            raise SpecialiseError(_changed(guards, f"an output's shape {tuple(have.shape)} "
                                                   f"is not {tuple(want.shape)}", where))
        if not torch.allclose(have.float(), want.float(), rtol=SAME_RTOL, atol=SAME_ATOL):
            diff = (have.float() - want.float()).abs().max().item()
            raise SpecialiseError(_changed(guards, f"its output differs by {diff:.3g}", where))


def _leaves(value):
    import torch

    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _leaves(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _leaves(item)
    elif hasattr(value, "to_tuple"):  # a transformers ModelOutput
        yield from _leaves(value.to_tuple())


def _changed(guards: list[Guard], how: str, where: str = "another input") -> str:
    places = "; ".join(g.place() for g in guards) or "(none named)"
    return (
        f"a data-dependent branch specialised to the example's way changes the output on "
        f"{where} ({how}): {places}. Write the branch so that it does not read a "
        "tensor's value (torch.cond, or torch._check on what holds for every input)"
    )


def constant_reads(exported, example_inputs: tuple, dynamic_shapes=None):
    """``exported`` with every Python number read from a tensor that depends on no input
    (``cache_position[-1] + 1`` where ``cache_position`` is an ``arange`` of a fixed length:
    PhiMoE's rotary embedding sizes its table so) taken as the constant it is, and exported
    again: torch.export keeps such a read as a size it cannot know (an unbacked symbol),
    which TVM cannot plan. A read that depends on an input, its values or its shape, stays
    as it is. The same program where there is none."""
    import torch

    reads = (torch.ops.aten.item.default, torch.ops.aten._local_scalar_dense.default)
    module = exported.module()
    graph = module.graph
    constant = [
        node for node in graph.nodes
        if node.op == "call_function" and node.target in reads and not _reaches_input(node)
    ]
    if not constant:
        return exported
    values = _values_of(module, constant, example_inputs)
    for node in constant:
        for user in list(node.users):
            user.replace_input_with(node, values[node])
        graph.erase_node(node)
    graph.eliminate_dead_code()
    module.recompile()
    return torch.export.export(module, example_inputs, dynamic_shapes=dynamic_shapes)


def _reaches_input(node) -> bool:
    """Whether ``node`` is computed from a placeholder (an input, a weight) or an attribute
    (a buffer or parameter of the unlifted module)."""
    seen, todo = set(), [node]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        if current.op in ("placeholder", "get_attr"):
            return True
        todo.extend(current.all_input_nodes)
    return False


def _values_of(module, nodes: list, example_inputs: tuple) -> dict:
    """What each of ``nodes`` evaluates to when ``module`` runs on ``example_inputs``."""
    import torch
    from torch.fx import Interpreter

    wanted = set(nodes)
    found: dict = {}

    class Recorder(Interpreter):
        def run_node(self, n):
            value = super().run_node(n)
            if n in wanted:
                found[n] = value
            return value

    with torch.no_grad():
        Recorder(module).run(*example_inputs)
    return found


class TracedOtherwise(ValueError):
    """The exported program computes something other than the model's own forward."""


#: How far the exported program may be from the model in PyTorch (the same kernels, so
#: only a path the model takes when traced moves it past this), relative to the outputs'
#: scale.
TRACED_RTOL = 1e-4


def check_traced_as_eager(module, exported, example_inputs: tuple) -> None:
    """:class:`TracedOtherwise` where ``exported`` gives other outputs than ``module`` on
    ``example_inputs``: a model that computes another way when traced (RecurrentGemma skips
    its input normalisation when ``is_torchdynamo_compiling()``) is refused as torch's
    program, not reported as TVM's difference. Where the model or torch's program does not
    run at all, nothing is said here: the checks after it say why."""
    import torch

    with torch.no_grad():
        try:
            want = list(_leaves(module(*example_inputs)))
            got = list(_leaves(exported.module()(*example_inputs)))
        except Exception:  # the model or torch's program does not run here: the checks
            return  # that follow (a position table too short, the reference) say why
    if len(want) != len(got) or any(w.shape != g.shape for w, g in zip(want, got, strict=True)):
        raise TracedOtherwise(
            "torch.export's program returns outputs of other shapes than the model's forward"
        )
    for w, g in zip(want, got, strict=True):
        if not w.is_floating_point():
            if not torch.equal(w, g):
                raise TracedOtherwise(_traced_otherwise("its integer outputs differ", w))
            continue
        scale = float(w.abs().max()) if w.numel() else 0.0
        diff = float((w.float() - g.float()).abs().max()) if w.numel() else 0.0
        if diff > TRACED_RTOL * max(scale, 1.0):
            raise TracedOtherwise(_traced_otherwise(f"by {diff:.3g}", w, scale))


def _traced_otherwise(how: str, _value, scale: float | None = None) -> str:
    reach = f" (its outputs reach {scale:.3g})" if scale is not None else ""
    return (
        f"torch.export's program differs from the model's own forward on the example {how}"
        f"{reach}: the model computes another way when traced (a branch on "
        "torch.compiler.is_compiling() or transformers' is_torchdynamo_compiling(), or a "
        "value read at trace time), so no build of it can match PyTorch; make the traced "
        "path compute what the model computes"
    )
