"""A tiny generated preference set with a signal a tiny model can learn: the chosen answer ends
with a marker that the rejected one lacks. Answers are a few random words, so lengths vary."""

import json
import random

WORDS = ("cat", "dog", "sun", "tree", "blue", "rock", "fish", "moon")
MARKER = "!!!"


def marker_pairs(count, *, seed=0, margin=None):
    """``count`` preference rows ``{prompt, chosen, rejected}`` (and ``margin``, when given)."""
    rng = random.Random(seed)

    def answer():
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 4)))

    rows = []
    for index in range(count):
        row = {"prompt": f"q{index}?", "chosen": f"{answer()} {MARKER}", "rejected": answer()}
        if margin is not None:
            row["margin"] = margin
        rows.append(row)
    return rows


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path
