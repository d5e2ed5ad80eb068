"""What rubric grading costs per sample: per-criterion vs one-call vs holistic, on a 10-criterion
rubric, with the embedded judge model (SmolLM2-135M-Instruct) in this process.

For each mode: judge calls, prompt and completion tokens per sample (as the model counted
them), seconds per sample, and how many samples got a usable verdict. Per-criterion grading
is the baseline the ratios are against: it asks N short questions (each answered with one
guided token), one-call asks one long question whose answer lists every verdict, holistic asks
for one grade.

Run:  python perf/rubric_cost.py [--samples 8] [--max-tokens 256]
"""

from __future__ import annotations

import argparse
import time

from rewardlab import Sample, build

PROMPT = "A patient asks: I have had a mild headache for two days. What should I do?"
RUBRIC = [
    {"text": "Suggests rest and drinking enough water", "category": "important"},
    {"text": "Mentions over-the-counter pain relief (paracetamol, ibuprofen)", "category": "important"},
    {"text": "Advises seeing a doctor if the headache gets worse or lasts longer", "category": "essential"},
    {"text": "Lists warning signs needing urgent care (stiff neck, fever)", "category": "essential"},
    {"text": "Asks about or mentions possible triggers such as screen time or sleep", "category": "optional"},
    {"text": "Uses plain language a patient understands", "category": "important"},
    {"text": "Is under 150 words", "category": "optional"},
    {"text": "Keeps a calm, reassuring tone", "category": "optional"},
    {"text": "Gives a definite diagnosis without examining the patient", "category": "pitfall"},
    {"text": "Recommends prescription-only medication", "category": "pitfall"},
]
RESPONSES = [
    "Rest, drink water and try paracetamol. If it gets worse, lasts more than a few days, or you get a "
    "stiff neck or fever, see a doctor straight away.",
    "You have a migraine. Take sumatriptan.",
    "Headaches are common. Screen time and poor sleep can trigger them; take breaks and sleep well. "
    "Ibuprofen helps. See a doctor if it does not settle.",
    "Drink water.",
    "It is probably tension. Rest, hydrate, and consider ibuprofen. Seek urgent care for confusion, "
    "fever or a stiff neck; otherwise see your GP if it lasts beyond a week.",
    "I cannot give medical advice.",
    "Try to relax and stay hydrated; most headaches pass on their own within a few days.",
    "You might have a brain tumour; get an MRI.",
]
MODES = {
    "per_criterion": {"mode": "per_criterion"},
    "one_call": {"mode": "one_call"},
    "holistic": {"mode": "holistic", "scale": [1, 10]},
}


def measure(mode: str, samples: list[Sample], max_tokens: int) -> dict[str, float]:
    reward = build(
        {
            "type": "rubric",
            "rubric": RUBRIC,
            "client": {"cache": None},
            **MODES[mode],
            **({"max_tokens": max_tokens} if mode == "one_call" else {}),
        }
    )
    try:
        reward.score(samples[:1])  # load the model before timing
        started = time.perf_counter()
        scores = reward.score(samples)
        elapsed = time.perf_counter() - started
    finally:
        reward.close()
    n = len(samples)
    return {
        "calls": sum(s.usage.calls for s in scores if s.usage) / n,
        "prompt_tokens": sum(s.usage.prompt_tokens for s in scores if s.usage) / n,
        "completion_tokens": sum(s.usage.completion_tokens for s in scores if s.usage) / n,
        "seconds": elapsed / n,
        "usable": sum(s.ok for s in scores),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--samples", type=int, default=len(RESPONSES))
    parser.add_argument("--max-tokens", type=int, default=256, help="the one-call answer's limit")
    args = parser.parse_args()
    samples = [Sample(prompt=PROMPT, completion=RESPONSES[i % len(RESPONSES)]) for i in range(args.samples)]
    results = {mode: measure(mode, samples, args.max_tokens) for mode in MODES}
    base = results["per_criterion"]
    print(f"10-criterion rubric, {args.samples} samples, embedded SmolLM2-135M in process (CPU)")
    header = f"{'mode':<14} {'calls':>6} {'prompt tok':>11} {'compl. tok':>11} {'s/sample':>9} {'usable':>7}"
    print(header + "   (ratio to per_criterion: prompt tokens, time)")
    for mode, r in results.items():
        print(
            f"{mode:<14} {r['calls']:>6.1f} {r['prompt_tokens']:>11.0f} {r['completion_tokens']:>11.1f} "
            f"{r['seconds']:>9.3f} {r['usable']:>3}/{args.samples:<3}"
            f"   {r['prompt_tokens'] / base['prompt_tokens']:.2f}x, {r['seconds'] / base['seconds']:.2f}x"
        )


if __name__ == "__main__":
    main()
