"""The ``rewardlab`` command line.

``rewardlab score`` scores a file of rollouts offline with a reward pipeline built from a YAML
config (the same file the TRL adapter and the benchmark runner take). ``rewardlab bench``
evaluates such a reward on a reward-model benchmark, and ``rewardlab serve`` serves it over HTTP.
``rewardlab serve-model`` serves a local model over an OpenAI-compatible API; ``rewardlab elicit``
replays saved rollouts through online rubric elicitation; ``rewardlab fetch-model`` downloads the
embedded default judge model; ``rewardlab train-rm`` trains a reward model on preference pairs
into a folder that the ``reward_model`` reward loads. Usage and config mistakes exit with status 2
and one line on stderr naming the problem. A run whose pipeline failed on some rows
(``backend_error`` or ``error``: a backend down, a missing dependency, a bug) exits with status 1
and a line on stderr per failing component, with its reason, unless ``--accept-failures`` is
given: a run in which every judge row failed must not look like a run that worked. Rows that fail
for their own sake (``invalid_input``, ``parse_error``, ``timeout``) are the data's, recorded in
the output and the summary, and keep exit status 0.
"""

from __future__ import annotations

from rewardlab.cli.main import main

__all__ = ["main"]
