"""Errors keep the part a person needs (issue 33): an export failure leads with the failing
line and torch's advice, and every failure names the step that broke, never a traceback."""

import re

import pytest

from planner.cli import main
from planner.tvm.compile import compile_model
from planner.tvm.network import Network
from planner.tvm.plan import lowering
from planner.tvm.sources import ModelSource, ModelSourceError, build_network
from planner.tvm.steps import STEPS, StepFailed, failure_text, step

MODELS = '''import torch


class Branchy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x):
        y = self.linear(x)
        if y.sum() > 0:
            return y * 2
        return y - 1


class Determinant(torch.nn.Module):
    def forward(self, x):
        return torch.linalg.det(x)


def branchy():
    torch.manual_seed(0)
    return Branchy(), (torch.randn(1, 4),)


def determinant():
    return Determinant(), (torch.randn(4, 4),)


class Tail(torch.nn.Module):
    def forward(self, x):
        return x[..., 1:] * 2.0


def tail():
    # Declared from 1, where the slice needs 3 at least: a constraint torch.export refuses.
    return Tail(), (torch.randn(1, 8),), ({1: torch.export.Dim("seq", min=1, max=16)},)
'''
MLP = ModelSource("zoo:mlp", {"features": 4, "hidden": [8], "classes": 2})


@pytest.fixture
def models(tmp_path):
    (tmp_path / "models.py").write_text(MODELS)
    return tmp_path


def test_a_data_dependent_branch_leads_with_its_line_and_torchs_advice(models, capfd):
    with pytest.raises(ModelSourceError) as failed:
        build_network(ModelSource("models.py:branchy"), base_dir=models)

    lines = str(failed.value).splitlines()
    assert lines[0].startswith("export failed: cannot export models.branchy with torch.export")
    assert lines[0].endswith("models.py:11 in forward: if y.sum() > 0:")
    assert lines[1].startswith("torch advises: consider using data-dependent friendly APIs")
    assert lines[2].startswith("GuardOnDataDependentSymNode: Could not guard")
    # Taking the branch the example's way was tried, and another input went the other way.
    assert lines[-1].startswith("specialising the branch as the example takes it does not hold")
    assert len(str(failed.value)) < 1500
    # torch's graph dump is cut, not printed ahead of the error.
    assert "def forward(" not in capfd.readouterr().err


def test_a_violated_constraint_keeps_torchs_explanation_of_the_guard(models):
    with pytest.raises(ModelSourceError) as failed:
        build_network(ModelSource("models.py:tail"), base_dir=models)

    lines = str(failed.value).splitlines()
    assert lines[0].startswith("export failed: cannot export models.tail with torch.export: "
                               "torch advises: Suggested fixes: seq = Dim('seq', min=3")
    assert lines[1].startswith("UserError: Constraints violated (seq)!")
    # Which guard failed, in torch's words: what was dropped before.
    assert lines[-1].startswith("- Not all values of seq")
    assert "satisfy the generated guard 3 <=" in lines[-1]


def test_an_operator_tvm_cannot_import_is_named_as_the_import_step(models):
    with pytest.raises(ModelSourceError) as failed:
        build_network(ModelSource("models.py:determinant"), base_dir=models)

    message = str(failed.value)
    # The export succeeded: nothing says "cannot export" (it did, for DeepSeek-V2 and OLMoE).
    assert message.startswith("import failed: torch.export exported it, TVM's importer did "
                              "not take it: AssertionError: Unsupported function types")
    assert "cannot export" not in message
    assert message.endswith("write that part of the model with operators it has (the list "
                            "above names them)")


def test_a_fold_failure_is_a_report_naming_the_step(monkeypatch, capsys):
    def broken(self, seed=0):
        raise AssertionError("emit_te now only supports Tensor that has ShapeExpr shape")

    monkeypatch.setattr(Network, "bind_weights", broken)

    with pytest.raises(StepFailed, match="^fold failed: AssertionError: emit_te"):
        compile_model(MLP, ["best-fit"], repeat=1, memory_configs=())
    # The command line ends in a report, not a traceback.
    code = main(["compile", "zoo:mlp", "--strategy", "best-fit", "--no-memory"])
    out = capsys.readouterr().out
    assert code == 1
    assert "best-fit: fold failed: AssertionError: emit_te" in out


def test_a_build_failure_names_the_build_step(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("no kernel for this target")

    monkeypatch.setattr(lowering, "finish_lowering", broken)

    (report,) = compile_model(MLP, ["best-fit"], repeat=1, memory_configs=())

    assert report.error == "build failed: RuntimeError: no kernel for this target"


def test_a_step_keeps_the_first_name_it_is_given():
    with pytest.raises(StepFailed) as failed, step("lower"), step("fold"):
        raise ValueError("x" * 5000)

    assert failed.value.step == "fold" and len(str(failed.value)) < 2100
    assert failure_text(ValueError("export failed: at f.py:3"), "build") == (
        "export failed: at f.py:3"
    )
    assert set(STEPS) >= {"export", "import", "fold", "build", "check"}


T5 = '''import torch
from planner.tvm.sources.transformers_models import _export, import_transformers


def encoder(seq=16):
    import_transformers()
    from transformers import T5Config, T5EncoderModel

    config = T5Config(d_model=16, d_kv=8, d_ff=32, num_layers=1, num_heads=2, vocab_size=32)
    model = T5EncoderModel(config).eval()

    class Ids(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, ids):
            return self.model(input_ids=ids, return_dict=False)[0]

    return _export("t5", Ids().eval(), torch.randint(0, 32, (1, seq)), seq, 32)
'''


@pytest.mark.slow
def test_the_t5_encoder_at_a_symbolic_length_plans_through_a_job(tmp_path):
    from planner.job_spec import JobSpec
    from planner.shapes import parse_cli
    from planner.tvm.job import run_compile
    from planner.tvm.sources.transformers_models import TransformersError, import_transformers

    try:
        import_transformers()
    except TransformersError as exc:
        pytest.skip(str(exc))
    (tmp_path / "t5.py").write_text(T5)

    # TVM's frontend lost the shape of T5's [-seq:] slice, and constant folding asserted
    # ("fold failed: AssertionError: emit_te ..."); the slice converts as torch reads it.
    job = JobSpec.from_json({
        "model": "t5", "source": "t5.py:encoder", "strategies": ["best-fit"], "repeat": 1,
        "memory_configs": [], "base_dir": str(tmp_path),
        "shapes": parse_cli(["seq=8,16"]).to_json(),
    })

    reports = run_compile(job)

    assert [r.shape_point for r in reports] == [{"seq": 8}, {"seq": 16}]
    for report in reports:
        assert report.ok and report.outputs_match is True, report.error


def test_a_tvm_check_without_words_says_where_tvm_made_it():
    import tvm
    from tvm import relax

    builder = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((2, 3), "float32"))
    with pytest.raises(Exception) as raised:  # noqa: PT011 - TVM's own error type
        with builder.function("main", [x]):
            builder.emit_func_output(
                builder.emit_te(tvm.topi.strided_slice, x, [0], [1], [1], [-5])
            )
    # The same failure as TVM words it in FoldConstant at a symbolic length: nothing after
    # the check's colon.
    bare = type(raised.value)("Check failed: axis < src_tensor_dim (-1 vs. 2) :")
    bare = bare.with_traceback(raised.value.__traceback__)

    with pytest.raises(StepFailed) as failed, step("fold"):
        raise bare

    assert re.search(
        r"\(-1 vs\. 2\) : \(checked in tvm::topi::strided_slice_with_axes, "
        r"include/tvm/topi/transform\.h:\d+\)$", str(failed.value)
    ), str(failed.value)
