"""A branch on a tensor's value stops torch.export; where it goes the same way for every
input (a position counter's first value), the model is exported as the example takes it,
the guard is an assumption of the Result with its line, and other inputs check it; where it
does not, the refusal names the guard (issue 59)."""

import pytest

from planner.tvm.compile import STOCK, compile_model
from planner.tvm.sources import ModelSource, ModelSourceError, build_network
from planner.tvm.sources.specialise import is_data_dependent, mirrored, second_input

MODELS = '''import torch


class FromACounter(torch.nn.Module):
    """A mask built as transformers' hybrid decoders build theirs: the branch reads a
    position counter that starts at 0 whenever no cache is passed."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(32, 8)
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, ids):
        position = torch.arange(ids.shape[1])
        x = self.embed(ids)
        if position[0] > 0:
            x = x * 0.0
        return self.linear(x).relu()


class OnTheValue(torch.nn.Module):
    """A branch on the input's own value: another input goes the other way."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x):
        y = self.linear(x)
        if y.sum() > 0:
            return y * 2
        return y - 1


class TracedOtherwise(torch.nn.Module):
    """Computes another way when traced, as RecurrentGemma skips its input normalisation
    under is_torchdynamo_compiling()."""

    def forward(self, x):
        return x * 2.0 if torch.compiler.is_compiling() else x * 3.0


def traced_otherwise():
    return TracedOtherwise(), (torch.ones(2, 4),)


def from_a_counter():
    torch.manual_seed(0)
    return FromACounter(), (torch.randint(0, 32, (1, 12)),)


def on_the_value():
    torch.manual_seed(0)
    return OnTheValue(), (torch.randn(3, 4) + 1.0,)
'''


def line_of(code: str) -> int:
    return MODELS.splitlines().index(code) + 1


@pytest.fixture
def models(tmp_path):
    (tmp_path / "models.py").write_text(MODELS)
    return tmp_path


def test_a_branch_every_input_takes_alike_exports_builds_and_matches(models):
    reports = compile_model(
        ModelSource(str(models / "models.py") + ":from_a_counter"), [STOCK, "best-fit"],
        repeat=0, memory_configs=(),
    )

    for report in reports:
        assert report.error is None, report.error
        assert report.outputs_match is True
        assert report.reference_check == "PyTorch"
        said = [a for a in report.assumptions if "data-dependent branch" in a]
        assert len(said) == 1, report.assumptions
        assert "'if position[0] > 0:'" in said[0]
        assert f"models.py:{line_of('        if position[0] > 0:')} in forward" in said[0]
        assert "took False" in said[0]


def test_a_branch_another_input_takes_otherwise_is_refused_naming_it(models):
    with pytest.raises(ModelSourceError) as refused:
        build_network(ModelSource("models.py:on_the_value"), base_dir=models)

    message = str(refused.value)
    assert message.startswith("export failed: cannot export models.on_the_value")
    assert "changes the output on " in message  # the example itself, or another input
    assert "'if y.sum() > 0:' at " in message
    assert f"models.py:{line_of('        if y.sum() > 0:')} in forward" in message
    assert "torch.cond" in message  # what to do about it


def test_data_dependent_failures_are_told_from_others_through_the_chain():
    try:
        try:
            raise RuntimeError("Could not guard on data-dependent expression Eq(u0, 1)")
        except RuntimeError as inner:
            raise ValueError("export failed") from inner
    except ValueError as outer:
        assert is_data_dependent(outer)
    assert not is_data_dependent(ValueError("Constraints violated (seq)!"))


def test_other_inputs_differ_from_the_example_within_its_range_and_type():
    import torch

    ids = torch.randint(3, 9, (2, 16))
    floats = torch.randn(4, 4) * 3 + 1
    flags = torch.rand(8) < 0.3

    drawn = second_input((ids, floats, flags))
    flipped = mirrored((ids, floats, flags))

    for got in (drawn, flipped):
        assert [t.dtype for t in got] == [ids.dtype, floats.dtype, flags.dtype]
        assert [t.shape for t in got] == [ids.shape, floats.shape, flags.shape]
        assert not torch.equal(got[0], ids) and not torch.equal(got[1], floats)
        assert int(got[0].min()) >= 3 and int(got[0].max()) <= 8
    assert torch.equal(flipped[2], ~flags)
    assert torch.equal(flipped[1], -floats)


def test_a_number_read_from_a_tensor_no_input_reaches_is_a_constant():
    from pathlib import Path

    models = Path(__file__).parents[1] / "torch_models.py"
    reports = compile_model(
        ModelSource(f"{models}:reads_a_constant"), [STOCK, "best-fit"], repeat=0,
        memory_configs=(),
    )

    for report in reports:
        assert report.error is None, report.error
        assert report.outputs_match is True
        assert report.reference_max_abs_diff == 0.0


def test_a_model_that_computes_another_way_when_traced_is_refused_as_torchs(models):
    with pytest.raises(ModelSourceError) as refused:
        build_network(ModelSource("models.py:traced_otherwise"), base_dir=models)

    message = str(refused.value)
    assert message.startswith("export failed: cannot export models.traced_otherwise")
    assert "torch.export's program differs from the model's own forward on the example by 1" \
        in message
    assert "(its outputs reach 3)" in message
    assert "is_compiling()" in message
