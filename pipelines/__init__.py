"""The five papers' recipes. Importing a module registers its recipe (`vrag_data.recipe.register`); the
installed package announces them under the `vrag_data.recipes` entry-point group."""
