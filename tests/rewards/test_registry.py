import pytest

from rewardlab import Combine, ConfigError, Route, RuleReward, Score, available, build, register
from rewardlab.rewards.registry import BUILTIN_REWARDS, reward_class


@register("constant_for_registry_test")
class Constant(RuleReward):
    def __init__(self, value: float = 1.0, name: str = "constant"):
        self.value = value
        self.name = name

    def check(self, sample):
        return Score(value=self.value)


def test_every_builtin_short_name_resolves_to_a_class():
    for short_name in BUILTIN_REWARDS:
        assert isinstance(reward_class(short_name), type), short_name


def test_build_nested_combine_and_route_from_yaml(tmp_path):
    path = tmp_path / "reward.yaml"
    path.write_text(
        "type: route\n"
        "by: data_source\n"
        "routes:\n"
        "  math:\n"
        "    type: combine\n"
        "    components:\n"
        "      accuracy: {type: constant_for_registry_test, value: 1.0, weight: 2.0}\n"
        "      style: {type: constant_for_registry_test, value: 0.5}\n"
        "default: {type: constant_for_registry_test, value: -1.0}\n"
    )
    reward = build(path)
    assert isinstance(reward, Route)
    math_reward = reward.routes["math"]
    assert isinstance(math_reward, Combine) and math_reward.name == "math"
    assert math_reward.weights == {"accuracy": 2.0, "style": 1.0}
    assert math_reward.components["accuracy"].name == "accuracy"
    from rewardlab import Sample

    scores = reward.score([Sample(fields={"data_source": "math"}), Sample(fields={"data_source": "x"})])
    assert [s.value for s in scores] == [2.5, -1.0]


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({}, "missing 'type'"),
        ({"type": "nope"}, "unknown reward type 'nope'"),
        (
            {"type": "constant_for_registry_test", "valeu": 1},
            "valeu: unknown option; accepted options: value, name",
        ),
        ({"type": "combine", "components": {"a": {"type": "nope"}}}, "components.a: unknown reward type"),
        ({"type": "combine"}, "components: Field required"),
        ({"type": "combine", "components": {"a": 1}}, "components.a: should be a reward config"),
        (
            {"type": "combine", "components": {"a": {"type": "constant_for_registry_test"}}, "mode": "max"},
            "mode: Input should be 'weighted_sum' or 'min'",
        ),
        (
            {"type": "route", "routes": {"x": {"type": "constant_for_registry_test", "value": "high"}}},
            "routes.x.value: Input should be a valid number",
        ),
    ],
)
def test_config_errors_name_the_path(config, message):
    with pytest.raises(ConfigError, match=message):
        build(config)


def test_bad_yaml_file_is_a_config_error(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("type: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        build(path)
    with pytest.raises(ConfigError, match="cannot read"):
        build(tmp_path / "missing.yaml")


def test_registering_a_taken_name_is_refused():
    assert "constant_for_registry_test" in available()
    with pytest.raises(ValueError, match="already registered"):
        register("math_answer")(Constant)
