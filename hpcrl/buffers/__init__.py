"""Buffers: what learners read (rollout and V-trace storage, replay with HER and
priorities, demonstrations) and the return estimators computed on it."""
