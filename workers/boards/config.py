"""Where board definitions come from: the worker's ``PEAKWATCH_BOARDS`` setting.

How to reach a board (an RPC address, a device key) is a fact about the host its worker runs
on, so it is configured there, next to ``-Q board.NAME``, as a JSON object of boards by name::

    PEAKWATCH_BOARDS='{
      "rpi4": {"kind": "rpc", "tracker": "10.0.0.5:9190", "key": "rpi4",
               "target": {"kind": "llvm", "mtriple": "aarch64-linux-gnu"}},
      "stm32": {"kind": "micro", "machine": "mps2-an500",
                "memory_capacity": 327680, "flash_capacity": 1048576}
    }'

``cpu`` and ``cuda`` need no entry. Keys a kind of its own reads (a micro board's ``board``,
``machine`` and ``flash_capacity``) are kept in :attr:`BoardConfig.extra`. The worker copies
kind, target and capacity into the Board row each time it serves a run, so the dashboard
shows what the worker really uses.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from dashboard.models import Board

#: The kinds of board the dashboard knows; each has a runner (workers.boards.RUNNER_CLASSES).
KINDS = tuple(Board.Kind.values)

#: Boards every worker knows without configuration.
BUILTIN: dict[str, dict[str, Any]] = {
    "cpu": {"kind": "cpu"},
    "cuda": {"kind": "cuda"},
}


class BoardConfigError(ValueError):
    pass


@dataclass(frozen=True)
class BoardConfig:
    name: str
    kind: str
    #: A target string or a TVM target dict; empty means the runner's default.
    target: str | dict = ""
    #: Bytes of memory the board has for a model (SRAM on a micro board).
    memory_capacity: int | None = None
    #: ``host:port`` of an RPC server, or of a tracker (then ``key`` names the device).
    rpc: str = ""
    tracker: str = ""
    key: str = ""
    #: Remote device the model runs on (``cpu``, ``cuda``, ...).
    device: str = "cpu"
    #: Seconds an RPC session may stay idle / to wait for a tracker to hand out the device.
    timeout: float = 60.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def target_string(self) -> str:
        """The target as the compiler (and the compile-cache key) takes it: a string."""
        if isinstance(self.target, dict):
            return json.dumps(self.target, sort_keys=True)
        return self.target


_FIELDS = {"kind", "target", "memory_capacity", "rpc", "tracker", "key", "device", "timeout"}


def parse(name: str, raw: dict[str, Any]) -> BoardConfig:
    """One board's entry, checked; an entry that cannot work fails here, not mid-run."""
    if not isinstance(raw, dict):
        raise BoardConfigError(f"board {name!r}: expected a JSON object, got {raw!r}")
    kind = raw.get("kind", "cpu")
    if kind not in KINDS:
        raise BoardConfigError(f"board {name!r}: kind {kind!r} is not one of {', '.join(KINDS)}")
    target = raw.get("target", "")
    if not isinstance(target, str | dict):
        raise BoardConfigError(f"board {name!r}: target must be a string or an object")
    capacity = raw.get("memory_capacity")
    if capacity is not None and (not isinstance(capacity, int) or capacity <= 0):
        raise BoardConfigError(f"board {name!r}: memory_capacity must be a positive integer")
    if kind == "rpc":
        if bool(raw.get("rpc")) == bool(raw.get("tracker")):
            raise BoardConfigError(f"board {name!r}: an RPC board needs either rpc or tracker")
        if raw.get("tracker") and not raw.get("key"):
            raise BoardConfigError(f"board {name!r}: a tracker needs the device key")
        for address in (raw.get("rpc"), raw.get("tracker")):
            if address:
                split_address(address, name)
    if kind == "micro":
        _check_micro(name, raw)
    if kind == "cuda":
        _check_cuda(name, raw)
    return BoardConfig(
        name=name,
        kind=kind,
        target=target,
        memory_capacity=capacity,
        rpc=raw.get("rpc", ""),
        tracker=raw.get("tracker", ""),
        key=raw.get("key", ""),
        device=raw.get("device", "cpu"),
        timeout=float(raw.get("timeout", 60.0)),
        extra={k: v for k, v in raw.items() if k not in _FIELDS},
    )


def _check_micro(name: str, raw: dict[str, Any]) -> None:
    from planner.tvm.micro.boards import UnknownBoard, resolve_board

    flash = raw.get("flash_capacity")
    if flash is not None and (not isinstance(flash, int) or flash <= 0):
        raise BoardConfigError(f"board {name!r}: flash_capacity must be a positive integer")
    try:
        resolve_board(raw.get("board"), raw.get("machine"))
    except UnknownBoard as exc:
        raise BoardConfigError(f"board {name!r}: {exc}") from None


def _check_cuda(name: str, raw: dict[str, Any]) -> None:
    from planner.job_spec import valid_arch

    target = raw.get("target")
    named = target.get("arch") if isinstance(target, dict) else None
    for arch in (raw.get("arch"), named):
        if arch is not None and not valid_arch(arch):
            raise BoardConfigError(
                f"board {name!r}: arch {arch!r} is not a CUDA architecture (sm_80, sm_90a)"
            )
    if raw.get("arch") and named and raw["arch"] != named:
        raise BoardConfigError(f"board {name!r}: arch {raw['arch']} but target arch {named}")


def split_address(address: str, name: str = "") -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise BoardConfigError(f"board {name!r}: {address!r} is not host:port")
    return host, int(port)


def lookup(name: str, configured: dict[str, Any] | None = None) -> BoardConfig | None:
    """The configuration of board ``name``, or None when no worker setting names it."""
    entries = {**BUILTIN, **(configured or {})}
    if name not in entries:
        return None
    return parse(name, entries[name])
