import sys

import pytest

from rewardlab import ConfigError, build
from rewardlab.errors import MissingDependency
from rewardlab.optional import require


def test_a_missing_optional_dependency_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(MissingDependency, match=r"pip install 'rewardlab\[datasets\]'"):
        require("pyarrow", "reading Parquet input")


def test_building_a_reward_whose_dependency_is_missing_is_a_config_error(monkeypatch):
    for module in [name for name in sys.modules if name.split(".")[0] == "if_verifiable"] + ["if_verifiable"]:
        monkeypatch.setitem(sys.modules, module, None)
    monkeypatch.delitem(sys.modules, "rewardlab.rewards.instructions", raising=False)
    with pytest.raises(ConfigError, match=r"rewardlab\[instructions\]"):
        build({"type": "instruction_following"})
