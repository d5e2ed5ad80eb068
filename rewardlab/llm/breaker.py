"""A circuit breaker: when a backend keeps failing, stop sending it requests for a while.

Without one, a dead server costs every sample its full retry schedule - minutes of backoff per
batch - before each fails anyway. With one, after ``threshold`` failed attempts in a row the
circuit opens and calls fail at once (status ``backend_error``, saying the circuit is open and
why); after ``cooldown_s`` one call is let through as a probe, and its success closes the circuit.
Rate limiting (429) is the server working as designed, so it does not count.
"""

from __future__ import annotations

import threading
import time


class CircuitBreaker:
    """Counts consecutive failed attempts across all calls to one backend.

    Args:
        threshold: Failed attempts in a row that open the circuit.
        cooldown_s: How long it stays open before a probe is allowed.
    """

    def __init__(self, threshold: int = 8, cooldown_s: float = 30.0):
        if threshold < 1:
            raise ValueError("threshold must be at least 1")
        self.threshold = threshold
        self.cooldown_s = cooldown_s
        self._failures = 0
        self._opened_at: float | None = None
        self._probing = False
        self._last_error = ""
        self._lock = threading.Lock()

    def allow(self) -> str | None:
        """None if a call may go ahead now; otherwise why not."""
        with self._lock:
            if self._opened_at is None:
                return None
            waited = time.monotonic() - self._opened_at
            if waited >= self.cooldown_s and not self._probing:
                self._probing = True  # half-open: this call is the probe
                return None
            return (
                f"circuit open: the backend failed {self._failures} times in a row "
                f"(last: {self._last_error}); next try in {max(0.0, self.cooldown_s - waited):.0f} s"
            )

    def succeeded(self) -> None:
        with self._lock:
            self._failures = 0
            self._opened_at = None
            self._probing = False

    def failed(self, error: str) -> None:
        """An attempt failed. A failed probe reopens the circuit for another cooldown; failures
        of calls already in flight when it opened do not extend the cooldown."""
        with self._lock:
            self._failures += 1
            self._last_error = error
            if self._probing:
                self._opened_at = time.monotonic()
                self._probing = False
            elif self._opened_at is None and self._failures >= self.threshold:
                self._opened_at = time.monotonic()

    def abandoned(self) -> None:
        """An attempt ended without an outcome (it was cancelled): if it was the probe, the next
        call may probe instead - otherwise the circuit would never close again."""
        with self._lock:
            self._probing = False

    @property
    def is_open(self) -> bool:
        with self._lock:
            return self._opened_at is not None
