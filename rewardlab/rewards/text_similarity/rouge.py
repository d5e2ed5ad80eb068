"""ROUGE-L: the F-measure of the longest common subsequence of tokens.

As Google's ``rouge-score`` computes it (``rouge_scorer.py``, ``_score_lcs``): precision = LCS /
prediction tokens, recall = LCS / reference tokens, F = 2PR / (P + R), and 0 when either side has
no token; tokens as its default tokenizer makes them (``tokenize.py``: lowercase, every run of
characters other than letters and digits is a separator), no stemming (``use_stemmer=False``, its
default). Departure: letters outside ASCII are kept (rouge-score drops them, which scores every
non-English text 0).

Why not the textbook dynamic programme: it costs prediction x reference steps in Python - 1.5 s
for two texts of 2,000 tokens. The LCS length here is the bit-parallel algorithm of Allison and
Dix (1986) in Hyyrö's form (2004): one pass over the prediction, each step a few operations on an
integer with one bit per reference token, which Python runs word by word in C.
"""

from __future__ import annotations

import re

_SEPARATORS = re.compile(r"[\W_]+")


def rouge_tokens(text: str) -> list[str]:
    """rouge-score's default tokens: lowercase runs of letters and digits."""
    return _SEPARATORS.sub(" ", text.lower()).split()


def lcs_length(first: list[str], second: list[str]) -> int:
    """Length of the longest common subsequence of two token lists (bit-parallel)."""
    if not first or not second:
        return 0
    positions: dict[str, int] = {}
    for index, token in enumerate(second):
        positions[token] = positions.get(token, 0) | (1 << index)
    full = (1 << len(second)) - 1
    row = full
    for token in first:
        matches = row & positions.get(token, 0)
        row = ((row + matches) | (row - matches)) & full
    return len(second) - row.bit_count()


def rouge_l(prediction: str, reference: str) -> float:
    """ROUGE-L F-measure of two texts."""
    predicted, gold = rouge_tokens(prediction), rouge_tokens(reference)
    common = lcs_length(predicted, gold)
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(gold)
    return 2 * precision * recall / (precision + recall)
