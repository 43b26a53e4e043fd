"""The roles an oracle-policy test config names: nothing is filled in, so every role a recipe uses is spelled out
(the judge: the rule scorers; grounding, reader and planner: the oracle itself, `same_as: policy`)."""

from __future__ import annotations

ORACLE_ROLES: dict[str, dict] = {
    "policy": {"kind": "oracle"},
    "judge": {"kind": "rules"},
    "grounding": {"same_as": "policy"},
    "reader": {"same_as": "policy"},
    "planner": {"same_as": "policy"},
}


def model_roles(policy: dict) -> dict[str, dict]:
    """A model policy (an endpoint mapping) playing every side role itself, written out (`same_as: policy`), with the
    rule scorers as judge: what a test config that drives one scripted server names."""
    return {"policy": policy, "judge": {"kind": "rules"},
            **{r: {"same_as": "policy"} for r in ("grounding", "reader", "planner")}}
