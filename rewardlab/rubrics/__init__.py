"""Rubric rewards (not built yet): signed weighted criteria, generation from references,
self-proposed rubrics and online elicitation. Tracked in the issue "Rubrics: ..."."""
