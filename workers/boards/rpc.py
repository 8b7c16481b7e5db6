"""Remote boards over TVM RPC: compile here, upload the library, run and time it there.

The board runs ``python -m tvm.exec.rpc_server`` (registered with a tracker under its key,
or listening on its own port). The worker compiles every strategy with
:func:`planner.compile.compile_model` for the board's target, uploads each exported
``model.so``, checks each planned build's outputs against the stock build *on the board*,
and times all builds there, interleaved, with the remote VM's ``time_evaluator``.

Memory on a remote board is the planned arena: the RPC server has no allocator statistics
to report, so ``measured_peak_bytes`` stays empty and ``measured`` says why.
"""

from __future__ import annotations

import logging
import socket
from pathlib import Path

from workers.boards.base import BoardRunner, Health
from workers.boards.config import split_address

log = logging.getLogger(__name__)

NO_REMOTE_MEMORY = (
    "remote board: the RPC server reports no allocator statistics; memory is the planned "
    "arena (planned_bytes)"
)


class RpcBoard(BoardRunner):
    kind = "rpc"
    default_target = "llvm"

    @property
    def address(self) -> str:
        return self.config.tracker or self.config.rpc

    def describe(self) -> dict:
        info = super().describe()
        info["rpc"] = {
            "mode": "tracker" if self.config.tracker else "direct",
            "address": self.address,
            "key": self.config.key,
            "device": self.config.device,
        }
        return info

    def health(self) -> Health:
        host, port = split_address(self.address, self.name)
        try:
            with socket.create_connection((host, port), timeout=5):
                pass
        except OSError as exc:
            return Health(False, f"RPC {self.address} unreachable: {exc}")
        if self.config.tracker:
            try:
                free = self._tracker_has_key()
            except Exception as exc:  # a tracker that answers nonsense is as bad as none
                return Health(False, f"RPC tracker {self.address}: {exc}")
            if not free:
                return Health(False, f"no server with key {self.config.key!r} on {self.address}")
        return Health(True)

    def _tracker_has_key(self) -> bool:
        from tvm import rpc

        host, port = split_address(self.config.tracker, self.name)
        summary = rpc.connect_tracker(host, port).summary()
        # Servers register as "server:KEY" (the key may carry a suffix after a colon).
        return any(
            info.get("key", "").split(":")[1:2] == [self.config.key]
            for info in summary.get("server_info", [])
        )

    def connect(self):
        """An RPC session with the board, through its tracker when it has one."""
        from tvm import rpc

        timeout = int(self.config.timeout)
        if self.config.tracker:
            host, port = split_address(self.config.tracker, self.name)
            tracker = rpc.connect_tracker(host, port)
            return tracker.request(
                self.config.key, priority=1, session_timeout=timeout, max_retry=3
            )
        host, port = split_address(self.config.rpc, self.name)
        return rpc.connect(host, port, session_timeout=timeout)

    def measure(
        self,
        *,
        model_name: str,
        source: str,
        params: dict,
        strategies: list[str],
        artifacts_dir: Path,
        repeat: int,
    ) -> list[dict]:
        from planner.compile import STOCK
        from planner.zoo import ModelSource, build_network

        # The stock build is the reference the board's outputs are checked against.
        compiled = list(dict.fromkeys([STOCK, *strategies]))
        reports = {
            report["strategy"]: report
            for report in self.compile(
                model_name=model_name, source=source, params=params, strategies=compiled,
                artifacts_dir=artifacts_dir,
                repeat=0,  # latency is measured on the board, not here
                memory_configs=(),
            )
        }
        network = build_network(ModelSource(source, params))
        self._run_remotely(reports, network, repeat)
        for report in reports.values():
            report["measured"] = {**report.get("measured", {}), "note": NO_REMOTE_MEMORY}
            report["board"] = {"kind": self.kind, "remote": self.address, "key": self.config.key}
        return [reports[s] for s in strategies]

    def _run_remotely(self, reports: dict[str, dict], network, repeat: int) -> None:
        from tvm import relax

        from planner.compile import ATOL, RTOL, STOCK, slug
        from planner.relax import execute

        session = self.connect()
        dev = session.device(self.config.device, 0)

        def loader(strategy: str, library: str):
            def load():
                remote_name = f"{slug(strategy)}.so"
                session.upload(library, target=remote_name)
                return relax.VirtualMachine(session.load_module(remote_name), dev)

            return load

        loaders = {}
        for strategy, report in reports.items():
            library = (report.get("artifacts") or {}).get("model.so")
            if report.get("error") or not library:
                if not report.get("error"):
                    report["error"] = "the build was not exported, so it cannot be uploaded"
                continue
            loaders[strategy] = loader(strategy, library)
        checks = execute.check_and_time(
            loaders, dev, network.random_inputs(0), reference=STOCK, entry=network.entry,
            repeat=repeat, rtol=RTOL, atol=ATOL, where=" on the board",
        )
        for strategy, check in checks.items():
            reports[strategy].update(check.report_fields())
