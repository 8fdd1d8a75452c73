"""Randomized concurrent histories (issue 6): a workload run by several processes, its recorded history,
and a checker that judges the history without importing the engine (tests/history/checker.py)."""
