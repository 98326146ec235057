"""Replay storage of the off-policy algorithms: transition chunks, n-step windows, buffers."""
from hpcrl.buffers.replay.buffer import ReplayBatch, ReplayBuffer
from hpcrl.buffers.replay.nstep import NStepWindow
from hpcrl.buffers.replay.prioritized import PrioritizedReplayBuffer
from hpcrl.buffers.replay.sumtree import SumTree
from hpcrl.buffers.replay.transitions import TransitionLayout, Transitions

__all__ = ["NStepWindow", "PrioritizedReplayBuffer", "ReplayBatch", "ReplayBuffer", "SumTree",
           "TransitionLayout", "Transitions"]
