"""Curation of a synth run's trajectories: the judge, the recipe's filter chains (the student's attempts among them)
and augmentations, recorded as verdicts (`postprocess.judge_and_filter`)."""
