"""A sixth recipe as a package of its own, installed beside vrag-data (`tests/support/plugin_site.py` installs it into
a test's folder): its role, reward, filter, layout backend, export format and recipe, each one module ending in one
registration line. Its distribution announces the package under every plugin group; the one discovery rule imports
the modules holding each kind's registration line. No library file names any of them."""
