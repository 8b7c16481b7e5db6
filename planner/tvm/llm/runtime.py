"""The steps an LLM deployment runs, with TVM's runtime alone.

A deployment's functions share one KV cache object: ``create_paged_kv_cache`` makes it for a
context window and a prefill chunk, each sequence is added to it, and every call of a model
function is framed by ``vm.builtin.kv_state_begin_forward`` (which sequences, how many new
tokens each) and ``kv_state_end_forward``. The checking process and the measuring child
(:mod:`planner.tvm.measure.memory`, which never imports TVM's compiler) both run them from here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Step:
    """One call of a model function: the sequences it extends, by how many tokens each,
    and its data inputs (token ids, logit positions)."""

    function: str
    sequences: tuple[int, ...]
    lengths: tuple[int, ...]
    arrays: tuple[np.ndarray, ...]


def at_bound(function: str, prefill_chunk: int, max_batch: int, vocab: int,
             seed: int = 0) -> Step:
    """``function``'s call at the bounds its memory is planned for: a whole prefill chunk
    (split over ``max_batch`` sequences for ``batch_prefill``), one token per sequence to
    decode."""
    rng = np.random.default_rng(seed)

    def ids(shape) -> np.ndarray:
        return rng.integers(0, vocab, size=shape).astype("int32")

    if function == "prefill":
        return Step(function, (0,), (prefill_chunk,), (ids((1, prefill_chunk)),))
    if function == "decode":
        return Step(function, (0,), (1,), (ids((1, 1)),))
    batch = max(1, min(max_batch, prefill_chunk))
    if function == "batch_prefill":
        lengths = [prefill_chunk // batch] * batch
        lengths[0] += prefill_chunk - sum(lengths)
        return batch_prefill_step(list(range(batch)), [ids(n).tolist() for n in lengths])
    if function == "batch_decode":
        return Step(function, tuple(range(max_batch)), (1,) * max_batch, (ids((max_batch, 1)),))
    raise ValueError(f"no step for function {function!r}")


def batch_prefill_step(sequences: Sequence[int], prompts: Sequence[Sequence[int]]) -> Step:
    """Several prompts laid end to end, each sequence's last position's logits asked for."""
    lengths = [len(p) for p in prompts]
    tokens = np.array([[t for p in prompts for t in p]], dtype="int32")
    positions = (np.cumsum(lengths) - 1).astype("int32")
    return Step("batch_prefill", tuple(sequences), tuple(lengths), (tokens, positions))


class Session:
    """One KV cache and the virtual machines of a deployment's functions (any of which
    creates the cache: each build carries ``create_paged_kv_cache``)."""

    def __init__(self, machines: dict, params: list, cache_arguments: Sequence[int]):
        import tvm

        self.machines, self.params = machines, params
        self._shape = tvm.runtime.ShapeTuple
        self._begin = tvm.get_global_func("vm.builtin.kv_state_begin_forward")
        self._end = tvm.get_global_func("vm.builtin.kv_state_end_forward")
        self._add = tvm.get_global_func("vm.builtin.kv_state_add_sequence")
        self._remove = tvm.get_global_func("vm.builtin.kv_state_remove_sequence")
        creator = next(iter(machines.values()))
        # ShapeTuples: the exported function checks its integer arguments as shapes.
        self.cache = creator["create_paged_kv_cache"](
            *[self._shape([int(v)]) for v in cache_arguments]
        )
        self.sequences: set[int] = set()

    def add(self, sequences: Sequence[int]) -> None:
        for sequence in sequences:
            if sequence not in self.sequences:
                self._add(self.cache, sequence)
                self.sequences.add(sequence)

    def clear(self) -> None:
        for sequence in sorted(self.sequences):
            self._remove(self.cache, sequence)
        self.sequences.clear()

    def upload(self, step: Step, dev) -> list:
        import tvm

        return [tvm.runtime.tensor(a, dev) for a in step.arrays]

    def run(self, step: Step, arrays: list) -> object:
        """The function's output (logits, as a TVM tensor) after one framed call."""
        self.add(step.sequences)
        self._begin(self.cache, self._shape(list(step.sequences)),
                    self._shape(list(step.lengths)), None)
        out = self.machines[step.function][step.function](*arrays, self.cache, self.params)
        self._end(self.cache)
        logits = out[0]
        self.cache = out[1]
        return logits
