"""Bugs: what counts as one (`oracles`: crash, stuck, texture, assertions, frame-rate drops),
what is kept of each (`findings`: the action trace, the last frames, the replay), and a run's
game crashes and why it stopped (`crashes`)."""
