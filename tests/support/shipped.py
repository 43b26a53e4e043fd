"""The five recipes this project ships, one per seed paper. Tests whose expectations are written per paper (tags,
budgets, options, demo coverage) iterate these, not whatever is installed: a sixth recipe, in a user's package or
in a test module, adds itself without breaking them."""

SHIPPED = ("evisrag", "mmdoc_r1", "unidoc_rl", "visor", "vrag_rl")
