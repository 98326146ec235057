"""Replay storage of the off-policy algorithms: transition chunks, n-step windows, buffers."""
from hpcrl.core.replay.buffer import ReplayBatch, ReplayBuffer
from hpcrl.core.replay.nstep import NStepWindow
from hpcrl.core.replay.prioritized import PrioritizedReplayBuffer
from hpcrl.core.replay.sumtree import SumTree
from hpcrl.core.replay.transitions import TransitionLayout, Transitions

__all__ = ["NStepWindow", "PrioritizedReplayBuffer", "ReplayBatch", "ReplayBuffer", "SumTree",
           "TransitionLayout", "Transitions"]
