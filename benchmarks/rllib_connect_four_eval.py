"""RLlib's side of benchmarks/connect_four_vs_rllib.py: the ``main`` policy of each checkpoint
of RLlib's connect-four self-play example against random play, in separate matches.

Runs in RLlib's own virtual environment (ray[rllib], open-spiel). For each checkpoint of the
trial (the example saves one every iteration), ``main``'s RLModule plays ``--matches``
OpenSpiel connect-four matches against uniform random play, half of them moving first; it
plays its most probable move, and an illegal one is replaced by a random legal move, as
RLlib's own env wrapper and the example's play-against-a-human code do. Prints one JSON line
per checkpoint: iteration, env steps, the trial's training seconds (``time_total_s``) and
the win rate (draws count half).

    /tmp/rllib-venv/bin/python benchmarks/rllib_connect_four_eval.py TRIAL_DIR
"""
from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

import numpy as np
import pyspiel
import torch
from ray.rllib.core.rl_module.rl_module import RLModule


def play(module: RLModule, matches: int, seed: int) -> float:
    """``module``'s win rate against random play over ``matches`` connect-four matches."""
    game = pyspiel.load_game("connect_four")
    rng = np.random.default_rng(seed)
    score = 0.0
    for match in range(matches):
        seat = match % 2
        state = game.new_initial_state()
        while not state.is_terminal():
            legal = state.legal_actions()
            if state.current_player() == seat:
                obs = np.reshape(state.observation_tensor(), [-1]).astype(np.float32)
                with torch.no_grad():
                    out = module.forward_inference({"obs": torch.from_numpy(obs)[None]})
                action = int(np.argmax(out["action_dist_inputs"][0].numpy()))
                if action not in legal:
                    action = int(rng.choice(legal))
            else:
                action = int(rng.choice(legal))
            state.apply_action(action)
        result = state.returns()[seat]
        score += 1.0 if result > 0 else 0.5 if result == 0 else 0.0
    return score / matches


def main() -> None:
    """Evaluate every checkpoint of the trial."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("trial", type=Path, help="The trial's directory (ray_results/...).")
    parser.add_argument("--matches", type=int, default=200)
    parser.add_argument("--every", type=int, default=1, help="Evaluate every k-th checkpoint.")
    args = parser.parse_args()
    with open(args.trial / "progress.csv") as src:
        progress = {int(r["training_iteration"]): r for r in csv.DictReader(src)}
    checkpoints = sorted(args.trial.glob("checkpoint_*"))[::args.every]
    for checkpoint in checkpoints:
        iteration = int(checkpoint.name.split("_")[-1]) + 1  # saved after that iteration
        row = progress.get(iteration)
        if row is None:
            continue
        module = RLModule.from_checkpoint(
            checkpoint / "learner_group" / "learner" / "rl_module" / "main")
        print(json.dumps({"iteration": iteration,
                          "env_steps": int(float(row["num_env_steps_sampled_lifetime"])),
                          "time_total_s": float(row["time_total_s"]),
                          "win_rate": play(module, args.matches, iteration)}), flush=True)


if __name__ == "__main__":
    main()
