"""Board definitions from the worker's PEAKWATCH_BOARDS: checked before a run needs them."""

import pytest

from workers import boards
from workers.boards.config import BoardConfigError, parse
from workers.boards.cpu import CpuBoard
from workers.boards.micro import MicroBoard
from workers.boards.rpc import RpcBoard


def test_cpu_and_cuda_need_no_configuration():
    assert isinstance(boards.runner_for("cpu"), CpuBoard)
    assert boards.runner_for("cuda").kind == "cuda"


def test_configured_boards_get_the_runner_of_their_kind():
    configured = {
        "pi": {"kind": "rpc", "tracker": "10.0.0.5:9190", "key": "rpi4",
               "target": {"kind": "llvm", "mtriple": "aarch64-linux-gnu"}},
        "stm32": {"kind": "micro", "memory_capacity": 196608},
    }

    pi = boards.runner_for("pi", configured)
    stm32 = boards.runner_for("stm32", configured)

    assert isinstance(pi, RpcBoard) and pi.address == "10.0.0.5:9190"
    assert '"mtriple": "aarch64-linux-gnu"' in pi.target
    assert isinstance(stm32, MicroBoard)
    assert stm32.target == "c" and stm32.memory_capacity == 196608


def test_an_unconfigured_board_is_unknown():
    with pytest.raises(boards.UnknownBoard, match="PEAKWATCH_BOARDS"):
        boards.runner_for("jetson", {})


@pytest.mark.parametrize("raw, message", [
    ({"kind": "fpga"}, "kind"),
    ({"kind": "rpc"}, "either rpc or tracker"),
    ({"kind": "rpc", "tracker": "h:9190"}, "key"),
    ({"kind": "rpc", "rpc": "no-port"}, "host:port"),
    ({"kind": "micro", "memory_capacity": -1}, "positive"),
])
def test_it_rejects_a_board_that_cannot_work(raw, message):
    with pytest.raises(BoardConfigError, match=message):
        parse("bad", raw)


def test_a_misconfigured_board_fails_the_lookup_with_the_reason():
    with pytest.raises(boards.UnknownBoard, match="misconfigured"):
        boards.runner_for("bad", {"bad": {"kind": "rpc"}})
