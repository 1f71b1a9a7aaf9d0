"""Offline analysis of replayed dumps: tables, metrics, plots, tree-shape search and reports (no torch)."""
