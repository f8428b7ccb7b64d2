"""The tester run: what a run is (`spec.RunSpec`), the tester loop around a game (`loop.TesterEnv`:
detect, claim, test, oracles), what finds the objects (`object_source`, `identity`), the drivers
that play the episodes (`runner`: the PPO explorer or random), the same on Ray (`cluster`), and
what a run writes as it goes (`runlog`)."""
