"""Boards behind TVM RPC: find them, connect, and check and time uploaded builds there.

The board runs ``python -m tvm.exec.rpc_server`` (registered with a tracker under its key,
or listening on its own port). Builds were compiled for its target elsewhere; here each
exported library is uploaded, its outputs are checked against the stock build *on the
board*, and all builds are timed there, interleaved, with the remote VM's
``time_evaluator``.
"""

from __future__ import annotations

import threading

from tvm import relax, rpc

from planner import npz_files
from planner.report import ATOL, RTOL, StrategyReport
from planner.tvm.build import execute
from planner.tvm.strategies import STOCK

NO_REMOTE_MEMORY = (
    "remote board: the RPC server reports no allocator statistics; memory is the planned "
    "arena (planned_bytes)"
)


def tracker_has_key(host: str, port: int, key: str) -> bool:
    summary = rpc.connect_tracker(host, port).summary()
    # Servers register as "server:KEY" (the key may carry a suffix after a colon).
    return any(
        info.get("key", "").split(":")[1:2] == [key]
        for info in summary.get("server_info", [])
    )


class BoardGone(RuntimeError):
    """The board did not answer within its time: gone, or busy past its time."""


def connect(*, rpc_address: tuple[str, int] | None = None,
            tracker: tuple[str, int] | None = None, key: str = "", timeout: float = 60):
    """An RPC session with the board, through its tracker when it has one, within
    ``timeout`` seconds: TVM's tracker request waits for a free server with the key for as
    long as it takes (``max_retry`` and ``session_timeout`` do not bound that wait), so a
    board that vanished would hold the worker until Celery's hour ran out. Past the time,
    :class:`BoardGone`; the waiting thread is left to TVM (it ends with its socket)."""
    if tracker is not None:
        where = f"no server with key {key!r} answered the tracker {tracker[0]}:{tracker[1]}"

        def request():
            return rpc.connect_tracker(*tracker).request(
                key, priority=1, session_timeout=int(timeout), max_retry=3
            )
    else:
        where = f"the RPC server {rpc_address[0]}:{rpc_address[1]} did not answer"

        def request():
            return rpc.connect(*rpc_address, session_timeout=int(timeout))
    done: dict = {}

    def attempt():
        try:
            done["session"] = request()
        except Exception as exc:  # handed to the caller below
            done["error"] = exc

    waiting = threading.Thread(target=attempt, name="rpc-connect", daemon=True)
    waiting.start()
    waiting.join(timeout)
    if "session" in done:
        return done["session"]
    if "error" in done:
        raise BoardGone(f"{where}: {type(done['error']).__name__}: {done['error']}")
    raise BoardGone(f"{where} within {timeout:g} s")


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in text)


def check_remotely(session, device: str, reports: dict[str, StrategyReport], repeat: int):
    """Upload every exported build, check outputs against the stock build and time them all
    on the board; the figures go into ``reports``."""
    dev = session.device(device, 0)

    def loader(strategy: str, library: str):
        def load():
            remote_name = f"{_slug(strategy)}.so"
            session.upload(library, target=remote_name)
            return relax.VirtualMachine(session.load_module(remote_name), dev)

        return load

    loaders = {}
    for strategy, report in reports.items():
        library = report.artifacts.get("model.so")
        if not report.ok or not library:
            if report.ok:
                report.error = "the build was not exported, so it cannot be uploaded"
            continue
        loaders[strategy] = loader(strategy, library)
    reference = reports[STOCK]
    try:
        if not reference.inputs_file:
            raise npz_files.UnsafeArrays("the compile handed over no inputs to check on")
        # The sandboxed compile wrote this file: it is checked before numpy reads it.
        inputs = npz_files.positional(npz_files.load_arrays(reference.inputs_file))
    except npz_files.UnsafeArrays as exc:
        for report in reports.values():
            if report.ok:
                report.error = f"the model's inputs were refused: {exc}"
        return
    checks = execute.check_and_time(
        loaders, dev, inputs, reference=STOCK, entry=reference.entry,
        repeat=repeat, rtol=RTOL, atol=ATOL, where=" on the board",
    )
    for strategy, check in checks.items():
        for key, value in check.report_fields().items():
            setattr(reports[strategy], key, value)
