"""Exploration: recurrent PPO, ensemble RND, the preference reward and its adaptive mix."""
