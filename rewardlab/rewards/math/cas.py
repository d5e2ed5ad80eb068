"""The slow path: symbolic equivalence with math-verify (latex2sympy + sympy), run inside a
killable worker process so that a pathological answer costs its budget and nothing more.

math-verify's own timeouts use ``signal.alarm``, which fails outside the main thread; they are
switched off here because the worker's budget is enforced from outside by killing the process.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass


class ReferenceNotParsed(ValueError):
    """The CAS could not read the gold answer, so no verdict about the prediction is possible."""


@dataclass(frozen=True, slots=True)
class CasVerdict:
    equivalent: bool
    reason: str | None = None


def cas_equivalent(gold: str, prediction: str) -> CasVerdict:
    """Symbolic comparison of two extracted answers (runs in a worker process)."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    logging.getLogger("math_verify").setLevel(logging.ERROR)
    config = [LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()]
    gold_parsed = parse(f"${gold}$", extraction_config=config, parsing_timeout=None)
    if not gold_parsed:
        raise ReferenceNotParsed(f"the CAS could not parse the reference answer {gold[:200]!r}")
    predicted = parse(f"${prediction}$", extraction_config=config, parsing_timeout=None)
    if not predicted:
        return CasVerdict(False, "the CAS could not parse the predicted answer")
    return CasVerdict(bool(verify(gold_parsed, predicted, timeout_seconds=None)))
