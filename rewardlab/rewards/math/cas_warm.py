"""Imported once by the CAS pool's forkserver (``preload``), never by user code.

Comparing a few answers at import builds math-verify's ANTLR parser and sympy's caches in the
forkserver itself, so every worker forked from it (replacements for killed workers included)
starts warm. The ANTLR parser predicts each grammar decision from a cache it fills the first time
the decision is met, so the answers here cover the common shapes (relations, function calls,
intervals and unions, sets, trigonometry and logarithms, matrices, sums and integrals): on first
contact, an equation such as ``p(0) + p(4) = 128 - 106r`` took 79 ms after one warm-up pair and
21 ms after these (about 0.6 s more, once per process, before the first comparison).
"""

from rewardlab.rewards.math.cas import cas_equivalent

_COMMON_SHAPES = (
    (r"\frac{1}{2}", "x^2 + 1"),
    (r"2\sqrt{3}", r"f(2) + g(x) = 3 - 2y"),
    (r"\left(-\infty, 3\right]", r"[1, 2) \cup (3, \infty)"),
    (r"\{1, 2, 3\}", r"x \in \{1,2\}"),
    (r"\sin^2 x + \cos x", r"\dfrac{\pi}{4} \cdot \log_2 8"),
    (r"a_n = 2^{n} - 1", r"\begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}"),
    (r"x \le 5", r"\text{(A)}\ 10^{\circ}"),
    (r"\sum_{k=1}^{n} k", r"\int_0^1 x\,dx"),
)

for _gold, _prediction in _COMMON_SHAPES:
    cas_equivalent(_gold, _prediction)
