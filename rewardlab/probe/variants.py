"""Exploit variants one sample at a time, for code that compares them itself: `blind_variants`
turns the library's blind exploits into plain functions from an honest `Sample` to the text of
its variant (None where the exploit does not apply or changes nothing).

The probe (`rewardlab.probe.runner`) scores whole sets of rows. A training watch
(`rewardlab.integrations.hacking_watch.HackingWatch`) instead scores a few fresh completions of
the policy every few steps and compares each variant with the completion itself. The watch sits
in the same layer as the probe and may not import it, so the caller hands it these functions::

    HackingWatch(probe, proxy, gold, exploits=blind_variants(["fluff_padding"], reward=proxy))

Only blind exploits: an answer-aware exploit's variant is measured against a decoy control, not
against the honest sample (`rewardlab.probe.exploit`), and a function of one sample cannot make
the decoys (they come from the other rows' answers).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from rewardlab.probe.exploit import Exploit, Target
from rewardlab.probe.kinds import sample_kinds
from rewardlab.probe.registry import exploits_named, registered_exploits
from rewardlab.probe.runner import max_variant_chars
from rewardlab.probe.targets import choices_of, criteria_of
from rewardlab.rewards.contract import Reward, Sample
from rewardlab.rubrics.model import Criterion

#: The text of a sample's variant, or None where there is none.
VariantMaker = Callable[[Sample], "str | None"]


@dataclass(frozen=True, slots=True)
class BlindVariant:
    """One blind exploit as a function of an honest sample (see `blind_variants`).

    Attributes:
        exploit: The library's exploit.
        reward: The reward the variant will be scored by, or None (every sample is targeted and
            no rubric is seen).
    """

    exploit: Exploit
    reward: Reward | None = None

    def __call__(self, sample: Sample) -> str | None:
        criteria: tuple[Criterion, ...] = ()
        if self.reward is not None:
            kinds = sample_kinds(self.reward, sample)
            if kinds is None or not self.exploit.targets(kinds):
                return None
            criteria = criteria_of(self.reward, sample)
        # Seeded from the exploit and the row, as the probe seeds it, so a variant is the same
        # every time the same completion is seen.
        seed = zlib.crc32(f"{self.exploit.name}:{sample.id or sample.prompt_text}".encode())
        target = Target(sample, choices=choices_of(sample), criteria=criteria, seed=seed)
        text = self.exploit.make(target)
        if text is not None and len(text) > max_variant_chars(target.completion):
            raise ValueError(
                f"exploit {self.exploit.name!r} made a variant of {len(text)} characters for "
                f"{sample.label()}, over the {max_variant_chars(target.completion)} allowed"
            )
        return None if text == target.completion else text


def blind_variants(
    names: Iterable[str] | None = None, *, reward: Reward | None = None
) -> dict[str, BlindVariant]:
    """The library's blind exploits as functions of one honest sample, by name.

    Args:
        names: Exploits to use, in this order (`registered_exploits` lists them); default: every
            blind exploit in the library.
        reward: The reward the variants will be scored by. When given, an exploit makes no
            variant of a sample whose rewards it does not target (`rewardlab.probe.kinds`), and
            sees the rubric criteria the reward grades the sample with - as in the probe.

    Raises:
        KeyError: An unknown name (the message lists the known ones).
        ValueError: An answer-aware exploit (see the module docstring).
    """
    if names is None:
        chosen = [exploit for exploit in registered_exploits().values() if not exploit.answer_aware]
    else:
        chosen = exploits_named(names)
    aware = [exploit.name for exploit in chosen if exploit.answer_aware]
    if aware:
        raise ValueError(
            f"answer-aware exploits are measured against a decoy control, not the sample itself: "
            f"{', '.join(aware)}; use blind ones"
        )
    return {exploit.name: BlindVariant(exploit, reward) for exploit in chosen}
