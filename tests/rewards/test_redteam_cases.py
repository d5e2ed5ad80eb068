"""Every attack in tests/rewards/data/redteam_cases.jsonl earns what it should (see SOURCES.md)."""

import json
from pathlib import Path

import pytest

from rewardlab import Sample, build

CASES = [json.loads(line) for line in (Path(__file__).parent / "data" / "redteam_cases.jsonl").open()]


@pytest.fixture(scope="module")
def rewards():
    built = {}
    yield lambda config: built.setdefault(json.dumps(config, sort_keys=True), build(config))
    for reward in built.values():
        reward.close()


@pytest.mark.parametrize("case", CASES, ids=[f"{c['class']}-{i}" for i, c in enumerate(CASES)])
def test_the_attack_earns_what_it_should(rewards, case):
    sample = Sample(
        prompt=case.get("prompt", ""),
        completion=case["completion"],
        reference=case["reference"],
        fields=case["fields"],
    )
    [score] = rewards(case["config"]).score([sample])
    assert (score.status.value, score.value) == ("ok", case["expected"]), (case["why"], score.reason)
