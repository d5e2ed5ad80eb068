"""Process rewards: step splitting (`splitting`), progress advantage and the implicit PRM
(`implicit`, on `logprobs` and `batching`), discriminative PRMs (`discriminative`, `formats`)
and training one (`training`), a generative step judge (`step_judge`), Monte-Carlo step labels
(`monte_carlo`, with the policies of `continuers`), and what step scores are used for
(`applications`)."""
