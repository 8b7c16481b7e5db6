"""The job file a worker hands a sandboxed child: typed, and refused whole when it is not."""

import pytest

from planner.job_spec import CudaOptions, JobSpec, JobSpecError, MicroOptions, valid_arch


def a_job(**changes) -> JobSpec:
    return JobSpec(model="cnn", source="zoo:small_cnn", strategies=("tvm-stock",), **changes)


def test_a_job_comes_back_from_json_as_it_went():
    job = a_job(
        phase="compile", params={"channels": 4}, repeat=0, memory_configs=(),
        micro=MicroOptions(board="stm32f746", sram_bytes=1024),
        cuda=CudaOptions(arch="sm_90a", measure_memory=False),
        shapes={"points": [{"h": 8}], "bounds": {"h": 8}}, moe="grouped",
    )

    assert JobSpec.from_json(job.to_json()) == job


@pytest.mark.parametrize(("changes", "words"), [
    ({"cuda_memory": True}, "unknown job keys: cuda_memory"),
    ({"cuda": {"arch": "sm_90", "mesure_memory": True}}, "unknown cuda keys: mesure_memory"),
    ({"repeat": "5"}, "repeat is str"),
    ({"repeat": True}, "repeat is bool"),
    ({"strategies": "tvm-stock"}, "strategies is a list of strings"),
    ({"check_locally": None}, "check_locally may not be null"),
    ({"phase": "execute"}, "unknown phase 'execute'"),
    ({"moe": "sparse"}, "unknown form of mixture of experts 'sparse'"),
    ({"cuda": {"arch": "90"}}, "'90' is not of the form sm_XY"),
    ({"micro": ["stm32"]}, "micro is an object"),
])
def test_a_job_with_a_misspelt_or_mistyped_option_is_refused(changes, words):
    data = {**a_job().to_json(), **changes}

    with pytest.raises(JobSpecError, match=words):
        JobSpec.from_json(data)


def test_a_job_without_a_model_is_refused():
    data = a_job().to_json()
    del data["model"]

    with pytest.raises(JobSpecError, match="no 'model'"):
        JobSpec.from_json(data)


@pytest.mark.parametrize(("arch", "valid"), [
    ("sm_80", True), ("sm_90a", True), ("sm_100", True), ("sm_100f", True),
    ("sm_8", False), ("compute_90", False), ("sm_90ab", False), ("sm_", False), (90, False),
])
def test_an_architecture_is_sm_and_a_compute_capability(arch, valid):
    assert valid_arch(arch) is valid
