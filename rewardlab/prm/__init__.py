"""Process rewards: step splitting (`splitting`), progress advantage and the implicit PRM
(`implicit`, on `logprobs`), discriminative PRMs (`discriminative`, `formats`), a generative
step judge (`step_judge`), Monte-Carlo step labels (`monte_carlo`), and what step scores are
used for (`applications`)."""
