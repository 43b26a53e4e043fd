"""A role a configured filter cannot run without, and the roles a chain of filters needs: read by the roles
pre-check (`vrag_data.teacher.roles`) before any episode is paid for."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RoleNeed:
    """A role a configured filter cannot run without. `waiver`: the filter's option that lets it run without the
    role, its verdicts saying the rule was not applied (e.g. "missing: keep"); "" when there is none."""

    role: str
    waiver: str = ""


def role_needs(filters: Sequence[Any]) -> list[tuple[str, RoleNeed]]:
    """(filter name, need) for every role the filters of a chain need; a filter without `needs_roles` needs none."""
    return [(f.name, need) for f in filters for need in (f.needs_roles() if hasattr(f, "needs_roles") else ())]
