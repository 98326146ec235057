"""Demonstrations: the files ``hpcrl eval --record`` writes, and the episodes
PPO+D replays."""
