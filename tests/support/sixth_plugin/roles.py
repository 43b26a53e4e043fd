"""Its role: a checker that re-reads the final answer; offline, the oracle plays it by the rule below."""

from vrag_data.schema.roles import register_role
from vrag_data.recipe.spec import RoleSpec


def confirm(ep: object) -> str:
    return f"CONFIRMED: {ep.task.answer}"  # type: ignore[attr-defined]


CHECKER = register_role(RoleSpec("checker", "re-reads the final answer and confirms it", oracle=confirm))
