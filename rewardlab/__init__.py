"""rewardlab: rewards you can trust for LLM post-training, behind one contract.

Every scorer is a `Reward`: `Sample`s in, one `Score` per sample out.
"""

from rewardlab.rewards.combine import Combine, Route
from rewardlab.rewards.contract import InvalidInput, Reward, Sample, Score, Status, Usage
from rewardlab.rewards.registry import ConfigError, available, build, register
from rewardlab.rewards.rule import RuleReward

__all__ = [
    "Combine",
    "ConfigError",
    "InvalidInput",
    "Reward",
    "Route",
    "RuleReward",
    "Sample",
    "Score",
    "Status",
    "Usage",
    "available",
    "build",
    "register",
]
__version__ = "0.1.0"
