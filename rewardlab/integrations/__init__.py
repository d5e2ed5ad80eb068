"""rewardlab inside training stacks: the TRL adapter (`as_reward_func`; `trl`) and callbacks
(`RubricElicitationCallback`; `trl_callbacks`; `HackingWatch`, which watches a run for reward
hacking; `hacking_watch`), OpenRLHF's remote reward wire format (`openrlhf`), which
``rewardlab serve`` answers at ``/get_reward``, and verl's custom reward function and reward
manager (`verl`, `verl_reward_manager`; verl loads them by module path).
"""

from rewardlab.lazy_exports import lazy_exports

_EXPORTS = {
    "as_reward_func": "rewardlab.integrations.trl",
    "RubricElicitationCallback": "rewardlab.integrations.trl_callbacks",
    "HackingWatch": "rewardlab.integrations.hacking_watch",
    "HackingThresholds": "rewardlab.integrations.hacking_watch",
    "WatchSampling": "rewardlab.integrations.policy_samples",
    "read_get_reward_request": "rewardlab.integrations.openrlhf",
    "get_reward_record": "rewardlab.integrations.openrlhf",
}

__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
