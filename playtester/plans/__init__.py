"""Explicit test plans (the AGT paper): nodes to reach and act at, rules that interrupt them,
validation callbacks decoupled from the plan, and plans made from YAML, demos or plain text."""
