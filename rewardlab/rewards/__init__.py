"""The reward contract, composition, the registry, rule verifiers and the TRL adapter."""
