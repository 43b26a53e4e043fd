"""Augmentations (pure): Trajectory -> new Trajectory with `extra["augmentation"]` and a new traj_id."""

from vrag_data.augment.base import AugmentError, derive
from vrag_data.augment.evisrag import ContextVariants, context_variants
from vrag_data.augment.visor import add_verification, pick_unseen_page, replace_queries, visor_augment

__all__ = [
    "AugmentError",
    "ContextVariants",
    "add_verification",
    "context_variants",
    "derive",
    "pick_unseen_page",
    "replace_queries",
    "visor_augment",
]
