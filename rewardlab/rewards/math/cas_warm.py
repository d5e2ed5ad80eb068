"""Imported once by the CAS pool's forkserver (``preload``), never by user code.

Parsing one answer at import builds math-verify's ANTLR parser and sympy's caches in the
forkserver itself, so every worker forked from it (replacements for killed workers included)
starts warm instead of paying ~50 ms on its first comparison.
"""

from rewardlab.rewards.math.cas import cas_equivalent

cas_equivalent(r"\frac{1}{2}", "x^2 + 1")
