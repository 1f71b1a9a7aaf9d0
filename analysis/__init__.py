"""Offline analysis of replayed dumps: tables, metrics, plots, tree-shape search and reports (no torch)."""

# Old import paths (before issue 21's folder move) that users' code imports keep working.
from replay.util.old_paths import install as _install_old_paths

_install_old_paths()
