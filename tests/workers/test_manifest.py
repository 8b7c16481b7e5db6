import pytest

from workers.manifest import ManifestError, parse

GOOD = """
[suite]
strategies = ["tvm-stock", "greedy-by-size"]
boards = ["cpu"]

[[models]]
name = "small"
source = "zoo:small_cnn"
params = { channels = 4 }
"""


def test_it_reads_models_strategies_and_boards():
    suite = parse(GOOD)
    assert [m.name for m in suite.models] == ["small"]
    assert suite.models[0].params == {"channels": 4}
    assert suite.strategies == ("tvm-stock", "greedy-by-size")
    assert suite.size == 2


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[suite\n", "not valid TOML"),
        ("[suite]\n", "at least one [[models]]"),
        ('[[models]]\nname = "a"\n', "needs a source"),
        ('[[models]]\nname = "a"\nsource = "zoo:x"\n[[models]]\nname = "a"\nsource = "zoo:x"\n',
         "listed twice"),
        ('[suite]\nstrategies = []\n[[models]]\nname = "a"\nsource = "zoo:x"\n',
         "non-empty list"),
        ('[[models]]\nname = "a"\nsource = "zoo:x"\nmoe = "sparse"\n',
         "model 'a': moe must be one of 'dense', 'grouped'"),
    ],
)
def test_it_rejects_a_malformed_manifest_with_a_clear_message(text, message):
    with pytest.raises(ManifestError, match=message.replace("[", r"\[")):
        parse(text)


def test_a_model_picks_the_form_of_its_mixtures_of_experts():
    suite = parse(GOOD + '\n[[models]]\nname = "moe"\nsource = "m.py:f"\nmoe = "grouped"\n')
    assert [m.moe for m in suite.models] == ["dense", "grouped"]


def test_it_rejects_unknown_strategies_naming_the_known_ones():
    with pytest.raises(ManifestError, match="unknown strategy greedy-by-size; known: none"):
        parse(GOOD, known_strategies=["none", "tvm-stock"])
