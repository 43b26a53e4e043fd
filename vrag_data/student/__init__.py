"""The student stage: the model to be trained answers the run's tasks, so difficulty filters decide for real."""

from vrag_data.student.run import StudentAttempt, extractive_answer, run_student

__all__ = ["StudentAttempt", "extractive_answer", "run_student"]
