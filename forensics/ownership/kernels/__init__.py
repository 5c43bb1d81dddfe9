"""Compiled per-event walks of the ownership stage: numpy and numba only, no DuckDB (the steps hand
them arrays and store what they return)."""
