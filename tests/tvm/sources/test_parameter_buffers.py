"""A buffer registered as an ``nn.Parameter`` (FalconMamba's RMS weights) stopped the import:
torch records it as both and fails to rebuild the module. It is exported as a plain tensor
of the same values, and the user's module keeps its own (issue 59)."""

from planner.tvm.compile import STOCK, compile_model
from planner.tvm.sources import ModelSource

MODELS = '''import torch


class ParameterBuffer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)
        self.register_buffer(
            "scale", torch.nn.Parameter(torch.rand(8) + 0.5, requires_grad=False),
            persistent=False,
        )

    def forward(self, x):
        return self.linear(x) * self.scale


def parameter_buffer():
    torch.manual_seed(0)
    return ParameterBuffer(), (torch.randn(2, 8),)
'''


def test_a_parameter_held_as_a_buffer_imports_and_matches(tmp_path):
    import torch

    (tmp_path / "models.py").write_text(MODELS)

    reports = compile_model(
        ModelSource(str(tmp_path / "models.py") + ":parameter_buffer"), [STOCK, "best-fit"],
        repeat=0, memory_configs=(),
    )

    for report in reports:
        assert report.error is None, report.error
        assert report.outputs_match is True
        assert report.reference_check == "PyTorch"
    # The user's module is as it was: its buffer still the Parameter it registered.
    from planner.tvm.sources.python_file import plain_buffers

    module = torch.nn.Module()
    module.register_buffer("held", torch.nn.Parameter(torch.ones(2), requires_grad=False))
    with plain_buffers(module):
        assert not isinstance(module.held, torch.nn.Parameter)
    assert isinstance(module.held, torch.nn.Parameter)
