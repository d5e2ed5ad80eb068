"""Attacking a reward with exploits of real samples (``rewardlab probe``).

From honest samples, each exploit of the library (`registry`) makes a variant that games some
kind of grader - answer games, format games, judge and rubric games, length and style, code games,
look-alike and invisible characters - and the probe (`runner`) reports how often, and by how
much, the variant out-scores what it is measured against (`results`): the honest sample for a
blind exploit, a decoy control for an answer-aware one (`exploit`). Which exploits apply to which
reward is said by reward kinds (`kinds`); `report` writes the tables. `variants` hands the blind
exploits to a training-time watch (`rewardlab.integrations.HackingWatch`).

Bias probes (`bias`, ``rewardlab probe bias``) take preference pairs instead (`bias_pairs`) and
measure how often a judge's or reward model's preference flips under changes that should not move
it (`bias_probes`), with Wilson intervals (`bias_results`); `bias_report` writes the report.
"""

from rewardlab.lazy_exports import lazy_exports

_EXPORTS = {
    "Exploit": "rewardlab.probe.exploit",
    "Target": "rewardlab.probe.exploit",
    "KINDS": "rewardlab.probe.exploit",
    "register_exploit": "rewardlab.probe.registry",
    "registered_exploits": "rewardlab.probe.registry",
    "BUILTIN_KINDS": "rewardlab.probe.kinds",
    "ExploitResult": "rewardlab.probe.results",
    "ProbeResult": "rewardlab.probe.results",
    "aprobe_reward": "rewardlab.probe.runner",
    "probe_reward": "rewardlab.probe.runner",
    "write_report": "rewardlab.probe.report",
    "blind_variants": "rewardlab.probe.variants",
    "BiasPair": "rewardlab.probe.bias_pairs",
    "read_pairs": "rewardlab.probe.bias_pairs",
    "BiasResult": "rewardlab.probe.bias_results",
    "aprobe_bias": "rewardlab.probe.bias",
    "probe_bias": "rewardlab.probe.bias",
    "write_bias_report": "rewardlab.probe.bias_report",
}

__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
