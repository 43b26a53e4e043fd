"""The five papers' recipes. Importing a module registers its recipe (`RECIPE = register(...)`); the installed
package announces this package once under the `vrag_data.recipes` entry-point group, and discovery imports each of its
modules holding that line (`vrag_data.plugins`): a new module here needs no other line."""
