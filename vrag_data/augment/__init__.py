"""Augmentations (pure): Trajectory -> new Trajectory with `extra["augmentation"]` and a new traj_id."""

from vrag_data.augment.base import AugmentError, Augmentation, Augmented, derive
from vrag_data.augment.evisrag import ContextVariants, TeacherTopKVariants, context_variants
from vrag_data.augment.visor import TeacherVerification, add_verification, pick_unseen_page, replace_queries, visor_augment

__all__ = [
    "AugmentError",
    "Augmentation",
    "Augmented",
    "TeacherTopKVariants",
    "TeacherVerification",
    "ContextVariants",
    "add_verification",
    "context_variants",
    "derive",
    "pick_unseen_page",
    "replace_queries",
    "visor_augment",
]
