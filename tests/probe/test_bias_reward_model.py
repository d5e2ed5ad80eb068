"""A bias probe of a real learned reward model: a tiny sequence-classification Llama saved to a
folder and built with ``reward_model``. Its preferences are arbitrary, so the expected counts come
from scoring every answer and rewrite one at a time (no batching, no pairing) and comparing by
hand."""

from __future__ import annotations

from rewardlab import Sample, build
from rewardlab.probe import probe_bias
from rewardlab.probe.bias_pairs import BiasPair
from rewardlab.probe.bias_probes import PROBES, Contest
from tests.reward_models.tiny_models import save_classifier

PAIRS = [
    BiasPair(f"p{index}", prompt, a, b, labelled=True)
    for index, (prompt, a, b) in enumerate(
        [
            ("What is 2 + 2?", "4.", "It is 5, I think."),
            ("Name a colour.", "Blue. The sky's colour.", "Dog."),
            ("Capital of France?", "Paris.", "Lyon, probably. Or Nice."),
            ("Say hi.", "Hi!", "Hello there. How are you?"),
            ("Is water wet?", "Yes. It wets things.", "No."),
            ("Largest planet?", "Jupiter.", "Saturn. It has rings."),
        ]
    )
]
REWRITES = ["length", "verbosity", "sycophancy", "format"]


def test_flips_of_a_tiny_reward_model_match_scoring_one_answer_at_a_time(tiny_tokenizer, tmp_path):
    save_classifier(tmp_path / "rm", tiny_tokenizer, seed=3, max_position_embeddings=1024)
    reward = build({"type": "reward_model", "model": str(tmp_path / "rm")})

    def value(prompt, text):
        (score,) = reward.score([Sample(prompt=prompt, completion=text)])
        assert score.ok, score.reason
        return score.value

    expected = {name: [0, 0, 0, 0] for name in REWRITES}  # flips, held, control flips, control held
    for pair in PAIRS:
        a, b = value(pair.prompt, pair.a), value(pair.prompt, pair.b)
        assert a != b
        winner, loser = (pair.a, pair.b) if a > b else (pair.b, pair.a)
        for name in REWRITES:
            for rewritten, kept, column in ((loser, winner, 0), (winner, loser, 2)):
                variant = PROBES[name].make(Contest(pair.prompt, rewritten, kept))
                new = value(variant.prompt, variant.answer)
                other = value(variant.prompt, kept)
                # A flip: the original loser now scores higher (the rewritten one, or the kept one).
                original_loser_now = new if rewritten is loser else other
                original_winner_now = other if rewritten is loser else new
                expected[name][column if original_loser_now > original_winner_now else column + 1] += 1

    result = probe_bias(reward, PAIRS, probes=[PROBES[name] for name in REWRITES], batch_size=8)
    got = {p.name: [p.flips.flips, p.flips.held, p.control.flips, p.control.held] for p in result.probes}
    assert got == expected
    assert sum(result.original.values()) == len(PAIRS) and "tie" not in result.original
    reward.close()
