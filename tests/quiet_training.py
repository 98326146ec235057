"""A test helper: train a config quietly and return the Trainer."""
from __future__ import annotations

from pathlib import Path


def train_quietly(tmp_path: Path, overrides: list[str]):
    """Train a config in ``tmp_path`` with no console, TensorBoard or final eval."""
    from hpcrl.config import from_dict
    from hpcrl.placement.serial_run import Trainer
    from hpcrl.runtime.run_dir import RunDir

    trainer = Trainer(from_dict({}, overrides + ["train.eval_episodes=0",
                                                 "train.tensorboard=false"]),
                      RunDir(tmp_path), console=None)
    trainer.train()
    return trainer
