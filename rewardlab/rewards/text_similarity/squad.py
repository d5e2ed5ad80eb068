"""SQuAD's answer normalisation, exact match and token F1.

Transcribed from the official SQuAD v2.0 evaluation script (``evaluate-v2.0.py``:
``normalize_answer``, ``get_tokens``, ``compute_exact``, ``compute_f1``): lowercase, remove
ASCII punctuation (``string.punctuation``), remove the articles a/an/the, collapse whitespace;
F1 over the bags of tokens, and 1 or 0 when either side has no token (v2.0's rule for
no-answer; v1.1 gave 0). Unlike `rewardlab.rewards.format.normalize_answer` (which keeps
"3.14" apart from "314"), nothing here departs from the script, so values equal published
SQuAD numbers.
"""

from __future__ import annotations

import collections
import re
import string

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD's ``normalize_answer``: lowercase, no punctuation, no articles, single spaces."""
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCTUATION)).split())


def exact_match(prediction: str, reference: str) -> float:
    """SQuAD's ``compute_exact``: 1.0 when the normalised texts are equal."""
    return float(normalize_answer(prediction) == normalize_answer(reference))


def token_f1(prediction: str, reference: str) -> float:
    """SQuAD's ``compute_f1``: F1 of the normalised tokens, counted as bags."""
    predicted, gold = normalize_answer(prediction).split(), normalize_answer(reference).split()
    if not predicted or not gold:
        return float(predicted == gold)
    same = sum((collections.Counter(predicted) & collections.Counter(gold)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(predicted), same / len(gold)
    return 2 * precision * recall / (precision + recall)
