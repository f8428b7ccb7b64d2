"""Explicit test plans (the AGT paper): nodes to reach and act at, rules that interrupt them,
validation callbacks decoupled from the plan, and plans made from YAML, demos or plain text. The
plan file's format and reader are `datasets/plans.py` (the run reads reset plans with it)."""
