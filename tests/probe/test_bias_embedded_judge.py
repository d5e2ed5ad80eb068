"""The bias probe end to end on the embedded judge model (SmolLM2-135M, a pointwise judge): every
pair and every rewrite is scored, and each is counted once. Slow (the model runs on the CPU)."""

from __future__ import annotations

from pathlib import Path

from rewardlab import build
from rewardlab.llm.default_model import default_model_path
from rewardlab.probe import probe_bias, read_pairs

DEV_PAIRS = Path(__file__).resolve().parents[2] / "examples" / "preferences_dev.jsonl"


def test_the_embedded_pointwise_judge_is_probed_end_to_end(model_available):
    pairs = read_pairs(DEV_PAIRS, limit=3)
    judge = build({"type": "pointwise_judge", "scale": [1, 5]})
    try:
        result = probe_bias(judge, pairs)
    finally:
        judge.close()
    assert result.pipeline_failures == []
    assert set(result.original) <= {"a", "b", "tie"} and sum(result.original.values()) == 3
    decided = result.original["a"] + result.original["b"]
    position, *rewrites = result.probes
    assert position.not_applicable.startswith("not a pairwise judge")
    assert [p.name for p in rewrites] == ["length", "verbosity", "sycophancy", "format"]
    for probe in rewrites:
        for count in (probe.flips, probe.control):
            assert count.pairs + count.skipped == decided, probe.name
            assert not count.failed, (probe.name, count.failed)
    own = result.self_preference
    assert own.family == ("smollm",) and own.judge_model == default_model_path().name
    assert own.not_applicable.startswith("no pair says who wrote its answers")
