"""Process rewards (not built yet): step splitting, discriminative and generative PRMs,
Monte-Carlo step labels, implicit PRM and progress advantage. Tracked in the issue
"Process rewards: ..."."""
