"""Rubric rewards: signed, weighted criteria graded by a judge (`grading.RubricReward`), rubrics
written from a reference or a task (`generate`), self-proposed rubrics (Compute-as-Teacher,
`self_proposed`), and rubrics that grow during training (`elicit`, `online`, `trl_callback`)."""
