"""Plan diffs: which tensors of two ``plan.json`` files changed, were added or are gone.

``plan.json`` is the plan a compile writes (``planner.tvm.compile``): its ``tensors`` (the
arena's, each with ``id``, ``role``, ``binding_index``, ``shape``, ``dtype``, ``size``,
``lower``, ``upper``, ``offset`` and ``producer``), its ``outputs`` and its figures. This
module reads that format, so it lives in the planner core beside the code that writes it,
and works on parsed plans as plain dicts: the dashboard's pages, the JSON API and any
script share it without Django.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from difflib import SequenceMatcher

import numpy as np

__all__ = [
    "MAX_ALIGNED_CELLS",
    "PLAN_FIELDS",
    "ROLES",
    "TensorChange",
    "diff_plans",
    "operator_kind",
    "parse_plan",
    "plan_diff_json",
]

#: Fields of a plan.json tensor a plan diff compares.
PLAN_FIELDS = ("size", "lower", "upper", "offset", "shape", "dtype")


def parse_plan(data: bytes | str) -> dict | None:
    """A ``plan.json`` document parsed; None unless it is a JSON object."""
    try:
        plan = json.loads(data)
    except ValueError:
        return None
    return plan if isinstance(plan, dict) else None


#: How a plan names what a tensor is for: an operator's result, a kernel's temporary lifted
#: into the plan (named ``kernel.buffer``), or an output handed to the caller.
ROLES = {"intermediate": "intermediate", "temporary": "kernel temporary", "output": "output"}

# TVM numbers kernels of one name in the order it meets them (conv2d, conv2d1, ...; their
# fusion fused_conv2d1_add1_relu1), so the numbers move whenever a layer comes or goes.
_KERNEL_NUMBER = re.compile(r"(?<=[A-Za-z])\d+(?=_|$)")


def operator_kind(producer: str) -> str:
    """``producer`` without TVM's numbering: ``fused_conv2d1_add1_relu1`` is a
    ``fused_conv2d_add_relu``."""
    return _KERNEL_NUMBER.sub("", producer or "")


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


@dataclass
class _PlanTensor:
    """One tensor of a plan as the diff sees it: what it is, not what it is called."""

    tensor: dict
    role: str
    #: The producer's operator kind (a temporary: its kernel's, and the buffer's name);
    #: "" where the plan names no producer.
    kind: str
    producer: str
    #: The n-th tensor (from 1) of this role and kind in graph order.
    call: int = 0
    #: The kind pairing goes by: "" where a tensor of its role names no producer on either
    #: side, since a known kind never equals an unknown one.
    paired_kind: str = ""

    @property
    def identity(self) -> tuple:
        # As text: a plan file's shape is whatever JSON it holds, and must hash.
        shape = json.dumps(self.tensor.get("shape"))
        return (self.role, self.paired_kind, shape, str(self.tensor.get("dtype")))


@dataclass
class _ReadPlan:
    arena: list[_PlanTensor]
    outputs: list[_PlanTensor]
    #: Whether the plan.json recorded roles and graph positions (written since they were).
    positioned: bool
    #: How many tensors of each role name no producer.
    unnamed: dict[str, int]


def _read_plan(plan: dict) -> _ReadPlan:
    def tensors(key):
        found = plan.get(key)
        return [t for t in found if isinstance(t, dict) and "id" in t] if isinstance(
            found, list) else []

    arena, outputs = tensors("tensors"), tensors("outputs")
    positioned = all(
        isinstance(t.get("binding_index"), int) and t.get("role") in ROLES
        for t in arena + outputs
    )

    def entry(tensor: dict, default_role: str) -> _PlanTensor:
        name = str(tensor["id"])
        kernel, dot, buffer = name.partition(".")
        role = tensor.get("role") if tensor.get("role") in ROLES else (
            "temporary" if dot and default_role != "output" else default_role)
        producer = str(tensor.get("producer") or (kernel if role == "temporary" else ""))
        if role == "temporary":
            # Where one kernel is called several times, its temporaries are buffer@binding.
            kind = f"{operator_kind(kernel)}.{buffer.split('@', 1)[0]}"
        else:
            kind = operator_kind(producer)
        return _PlanTensor(tensor, role, kind, producer)

    def in_graph_order(entries: list[_PlanTensor]) -> list[_PlanTensor]:
        # Plans list tensors in binding order; the index, where recorded, says so exactly.
        if positioned:
            entries = sorted(entries, key=lambda e: e.tensor["binding_index"])
        counts: dict[tuple[str, str], int] = {}
        for e in entries:
            counts[e.role, e.kind] = e.call = counts.get((e.role, e.kind), 0) + 1
        return entries

    read_arena = in_graph_order([entry(t, "intermediate") for t in arena])
    read_outputs = in_graph_order([entry(t, "output") for t in outputs])
    unnamed: dict[str, int] = {}
    for e in read_arena + read_outputs:
        if not e.kind:
            unnamed[e.role] = unnamed.get(e.role, 0) + 1
    return _ReadPlan(read_arena, read_outputs, positioned, unnamed)


#: Costs of aligning two graphs: a tensor paired with one of its kind in another shape (1),
#: and a tensor left unpaired (2). Leaving two tensors unpaired (4) costs more than pairing
#: them reshaped, so a layer that only changed shape stays paired; a tensor the same on both
#: sides costs nothing, so an inserted layer is left unpaired rather than every later tensor
#: being paired with the one before it.
_RESHAPED, _UNPAIRED = 1, 2
_NEVER = 1 << 40
#: Graphs whose differing stretch is larger than this (tensors before x after) are aligned
#: the quicker way (``_pair_roughly``), and the page says so.
MAX_ALIGNED_CELLS = 16_000_000


def _pair(old: list[_PlanTensor], new: list[_PlanTensor]) -> tuple[list[tuple], bool]:
    """(before, after) pairs in graph order, None on the side a tensor is missing from, and
    whether the alignment was the cheapest one (False: too large, aligned roughly).

    The two graphs are aligned as sequences of what each tensor is, as a text diff aligns
    lines, at the least cost (``_RESHAPED``, ``_UNPAIRED``): a tensor pairs only with one of
    its role and producer kind, and a tensor with no producer named only with one that
    agrees in everything. A layer inserted or removed leaves the others paired; a resolution
    or a width changing everywhere pairs every layer with itself, reshaped, not with another
    layer that happens to have its shape now.
    """
    # Most commits change a stretch of the graph: the ends that agree pair as they are.
    same = [a.identity == b.identity for a, b in zip(old, new, strict=False)]
    start = same.index(False) if False in same else len(same)
    end = 0
    while (end < min(len(old), len(new)) - start
           and old[-1 - end].identity == new[-1 - end].identity):
        end += 1
    left, right = old[start:len(old) - end], new[start:len(new) - end]
    exact = len(left) * len(right) <= MAX_ALIGNED_CELLS
    middle = _pair_cheapest(left, right) if exact else _pair_roughly(left, right)
    pairs = [
        *zip(old[:start], new[:start], strict=True),
        *middle,
        *zip(old[len(old) - end:], new[len(new) - end:], strict=True),
    ]
    return pairs, exact


def _pair_cheapest(old: list[_PlanTensor], new: list[_PlanTensor]) -> list[tuple]:
    """The least-cost alignment (Needleman-Wunsch with a linear gap), a row at a time."""
    n, m = len(old), len(new)
    if not n or not m:
        return [(e, None) for e in old] + [(None, e) for e in new]
    codes: dict = {}

    def code(key) -> int:
        return codes.setdefault(key, len(codes))

    what_old = np.array([code(e.identity) for e in old])
    what_new = np.array([code(e.identity) for e in new])
    # A tensor whose kind is unknown has a kind of its own: it pairs only when identical.
    kind_old = np.array([code((e.role, e.paired_kind) if e.paired_kind else ("?", "old", i))
                         for i, e in enumerate(old)])
    kind_new = np.array([code((e.role, e.paired_kind) if e.paired_kind else ("?", "new", j))
                         for j, e in enumerate(new)])
    steps = np.arange(m + 1, dtype=np.int64) * _UNPAIRED
    previous = steps.copy()
    # 0: paired, 1: the old tensor unpaired, 2: the new tensor unpaired.
    moves = np.empty((n, m), dtype=np.int8)
    for i in range(n):
        cost = np.where(what_new == what_old[i], 0,
                        np.where(kind_new == kind_old[i], _RESHAPED, _NEVER))
        paired = previous[:-1] + cost
        old_alone = previous[1:] + _UNPAIRED
        best = np.minimum(paired, old_alone)
        # Leaving new tensors unpaired along the row: a running minimum.
        row = np.concatenate(([(i + 1) * _UNPAIRED], best))
        row = np.minimum.accumulate(row - steps) + steps
        moves[i] = np.where(row[1:] == paired, 0, np.where(row[1:] == old_alone, 1, 2))
        previous = row
    pairs = []
    i, j = n, m
    while i or j:
        move = 1 if not j else 2 if not i else moves[i - 1, j - 1]
        if move == 0:
            pairs.append((old[i - 1], new[j - 1]))
            i, j = i - 1, j - 1
        elif move == 1:
            pairs.append((old[i - 1], None))
            i -= 1
        else:
            pairs.append((None, new[j - 1]))
            j -= 1
    return pairs[::-1]


def _pair_roughly(old: list[_PlanTensor], new: list[_PlanTensor]) -> list[tuple]:
    """Stretches that agree in everything paired as they are (difflib's longest matching
    blocks); between them, tensors of one role and producer kind paired in order."""
    pairs: list[tuple] = []
    matcher = SequenceMatcher(
        None, [e.identity for e in old], [e.identity for e in new], autojunk=False
    )
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            pairs += zip(old[i1:i2], new[j1:j2], strict=True)
            continue
        left, right = old[i1:i2], new[j1:j2]
        by_kind = SequenceMatcher(
            None,
            [(e.role, e.paired_kind) if e.paired_kind else ("", i) for i, e in enumerate(left)],
            [(e.role, e.paired_kind) if e.paired_kind else ("", -1 - j)
             for j, e in enumerate(right)],
            autojunk=False,
        )
        for kind_tag, a1, a2, b1, b2 in by_kind.get_opcodes():
            if kind_tag == "equal":
                pairs += zip(left[a1:a2], right[b1:b2], strict=True)
            else:
                pairs += [(e, None) for e in left[a1:a2]]
                pairs += [(None, e) for e in right[b1:b2]]
    return pairs


@dataclass
class TensorChange:
    #: The tensor's name in the newer plan (the older one's for a tensor that is gone).
    id: str
    status: str  # "changed", "added" (new) or "removed" (gone)
    fields: dict  # field -> [before, after]
    before: dict | None
    after: dict | None
    role: str = "intermediate"
    #: The operator writing it on each side (None where it is missing).
    producers: tuple = (None, None)
    #: Its producer's kind without TVM's numbering, and which call of that kind it is.
    kind: str = ""
    calls: tuple = (None, None)

    @property
    def base_id(self) -> str | None:
        return self.before["id"] if self.before else None

    @property
    def head_id(self) -> str | None:
        return self.after["id"] if self.after else None

    @property
    def renamed(self) -> bool:
        return bool(self.before and self.after and self.base_id != self.head_id)

    @property
    def producer(self) -> str:
        return self.producers[1] or self.producers[0] or ""

    @property
    def names(self) -> list[str]:
        """Its name on each side where it has one, once if the same; a temporary's without
        its kernel, which the row names as its producer."""
        found = [self.base_id, self.head_id]
        if self.role == "temporary":
            found = [name and name.partition(".")[2] for name in found]
        return list(dict.fromkeys(name for name in found if name))

    @property
    def role_label(self) -> str:
        return ROLES.get(self.role, self.role)

    @property
    def call_text(self) -> str:
        """Which call of its operator kind it is ("3rd call", "3rd → 4th call")."""
        before, after = self.calls
        if not self.kind:
            return ""
        if before and after and before != after:
            return f"{_ordinal(before)} → {_ordinal(after)} call"
        return f"{_ordinal(after or before)} call"

    @property
    def resized(self) -> bool:
        return "size" in self.fields

    @property
    def moved(self) -> bool:
        return "offset" in self.fields

    @property
    def lifetime_changed(self) -> bool:
        return "lower" in self.fields or "upper" in self.fields


def _span(tensor: dict):
    lower, upper = tensor.get("lower"), tensor.get("upper")
    if isinstance(lower, int) and isinstance(upper, int):
        return upper - lower
    return (lower, upper)


def _change(a: _PlanTensor | None, b: _PlanTensor | None) -> TensorChange | None:
    one = b or a
    common = dict(
        role=one.role, kind=one.kind,
        producers=(a.producer if a else None, b.producer if b else None),
        calls=(a.call if a else None, b.call if b else None),
    )
    if a is None:
        return TensorChange(b.tensor["id"], "added", {}, None, b.tensor, **common)
    if b is None:
        return TensorChange(a.tensor["id"], "removed", {}, a.tensor, None, **common)
    fields = {
        f: [a.tensor.get(f), b.tensor.get(f)] for f in PLAN_FIELDS
        if a.tensor.get(f) != b.tensor.get(f)
    }
    if _span(a.tensor) == _span(b.tensor):
        # Steps count bindings: a layer coming or going earlier in the graph shifts every
        # later lifetime without the tensor living any longer.
        fields.pop("lower", None)
        fields.pop("upper", None)
    if not fields:
        return None
    return TensorChange(b.tensor["id"], "changed", fields, a.tensor, b.tensor, **common)


def _matching_notes(old: _ReadPlan, new: _ReadPlan) -> list[str]:
    """What the pairing had to do without, in words for the page."""
    notes = []
    for side, plan in (("base", old), ("head", new)):
        if not plan.positioned and (plan.arena or plan.outputs):
            notes.append(
                f"The {side} plan.json was written before plans recorded each tensor's role "
                "and place in the graph: its tensors were taken in the order listed, and "
                "roles read from their names."
            )
        if plan.unnamed:
            count = sum(plan.unnamed.values())
            roles = " and ".join(f"{ROLES[role]}s" for role in plan.unnamed)
            notes.append(
                f"{count} tensor{'s' if count != 1 else ''} of the {side} plan "
                f"name{'' if count != 1 else 's'} no producer: {roles} were paired only where "
                "shape, dtype and place in the graph all agree."
            )
    return notes


def diff_plans(before: dict, after: dict) -> dict:
    """Which tensors changed size, offset, shape or how long they live between two plans,
    which are new and which are gone.

    Tensors are paired by what they are (role, producer, its place among the calls of that
    producer, shape and dtype), not by name: names such as ``alloc3`` are renumbered
    whenever the graph changes. ``matching`` says what the pairing had to do without, for
    plan.json files written before plans recorded roles and places in the graph.
    """
    old, new = _read_plan(before), _read_plan(after)
    everything = old.arena + old.outputs + new.arena + new.outputs
    blind = {e.role for e in everything if not e.kind}
    for e in everything:
        e.paired_kind = "" if e.role in blind else e.kind
    arena, arena_exact = _pair(old.arena, new.arena)
    outputs, outputs_exact = _pair(old.outputs, new.outputs)
    pairs = arena + outputs
    changes = [c for c in (_change(a, b) for a, b in pairs) if c is not None]
    paired = sum(a is not None and b is not None for a, b in pairs)
    notes = _matching_notes(old, new)
    if not (arena_exact and outputs_exact):
        notes.append(
            "The graphs differ in too many tensors to align at the least cost: stretches "
            "that agree in everything were paired, and between them tensors of one role "
            "and producer in order."
        )
    return {
        "arena_bytes": [before.get("arena_bytes"), after.get("arena_bytes")],
        "tensor_count": [len(old.arena), len(new.arena)],
        "output_count": [len(old.outputs), len(new.outputs)],
        "unchanged": paired - sum(c.status == "changed" for c in changes),
        "resized": sum(c.resized for c in changes),
        "moved": sum(c.moved for c in changes),
        "lifetime_changed": sum(c.lifetime_changed for c in changes),
        "added": sum(c.status == "added" for c in changes),
        "removed": sum(c.status == "removed" for c in changes),
        "changes": changes,
        "matching": {"fallback": bool(notes), "notes": notes},
        # Every pair, changed or not, by its names on both sides.
        "pairs": [[a.tensor["id"], b.tensor["id"]] for a, b in pairs if a and b],
        # Each side's names of what changed in the arena, to outline on its own timeline.
        "changed_ids": {
            "base": [c.base_id for c in changes if c.base_id and c.role != "output"],
            "head": [c.head_id for c in changes if c.head_id and c.role != "output"],
        },
    }


def plan_diff_json(diff: dict) -> dict:
    return {
        **diff,
        "changes": [
            {**asdict(c), "base_id": c.base_id, "head_id": c.head_id} for c in diff["changes"]
        ],
    }
