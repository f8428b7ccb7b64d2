"""Imitation: the memory-augmented GRU policy, its DINO-style teacher, behaviour cloning, JSD scoring."""
