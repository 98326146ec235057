"""The ``env.league`` keys: how a multi-agent game's other seats are played in self-play, when
snapshots of the trained policy join the league, and how its members are rated."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from hpcrl.field_docs import doc


@dataclass
class LeagueConfig:
    """Self-play against a league of the trained policy's snapshots (a multi-agent env.id)."""

    opponents: Literal["latest", "uniform", "pfsp"] = doc(
        "How each match's opponent is drawn from the league's snapshots, when the match "
        "starts (never inside one): 'latest' the newest, 'uniform' any, 'pfsp' prioritised "
        "fictitious self-play (AlphaStar): by env.league.pfsp_weighting of the estimated win "
        "rate against each. Before the first snapshot the opponent is random play.", "pfsp")
    pfsp_weighting: Literal["hard", "variance"] = doc(
        "PFSP's weighting of an opponent beaten with probability p: 'hard' (1 - p)^2, the "
        "opponents the policy loses to; 'variance' p (1 - p), those it is even with.", "hard")
    latest_fraction: float = doc(
        "This fraction of the matches is played against the newest snapshot whatever "
        "env.league.opponents says (0.8 with 'uniform': the current self 80 %, past selves "
        "20 %).", 0.2)
    snapshot_every: int = doc(
        "Env steps between snapshots of the trained policy joining the league (at the first "
        "update past each multiple; 0: only by env.league.win_threshold).", 20_000)
    win_threshold: float = doc(
        "A snapshot also joins when the trained policy has won at least this fraction of its "
        "last env.league.threshold_matches matches against the league (draws count half; "
        "0: off). RLlib's connect-four example uses 0.95.", 0.0)
    threshold_matches: int = doc("Matches env.league.win_threshold is measured over.", 200)
    frozen: dict = doc(
        "Frozen policies in the league from the start, trained elsewhere and never here: "
        "{name: path}, path a run directory (its checkpoint's policy), a checkpoint file or "
        "another run's snapshot, of an actor-critic trained on this game with "
        "actor.action_mask. Each joins as the snapshot '<name>-0', drawn like the trained "
        "policy's snapshots, rated beside them, and playable as env.league.eval_opponent.",
        factory=dict)
    eval_opponent: str = doc(
        "Who the evaluations play (train.eval_every, the final one, hpcrl eval): 'random' "
        "play, a scripted bot 'module:Class' (made with no arguments; act(obs, mask, rng) "
        "returns a legal move), a snapshot's name from hpcrl league RUN, or 'latest', the "
        "newest snapshot (the trained policy's teammates in a cooperative game: the final "
        "snapshot is the trained policy).", "random")
    player: str = doc(
        "The trained policy's name in the league: its snapshots are '<player>-<env steps>', "
        "and matches.csv and the ratings name it so. A job of several policies (the "
        "policies section) sets it to each policy's name.", "main")
    versus: list = doc(
        "The policies whose snapshots this one draws its opponents from, by name (a frozen "
        "policy's name counts); empty: every snapshot of the league. A main exploiter of "
        "the policies section plays its mains only.", factory=list)
    reset_fraction: float = doc(
        "When one of its snapshots joins the league, the trained policy goes back to its "
        "initial weights with this probability (its optimiser's moments cleared; its "
        "counters, envs and schedules go on): AlphaStar's exploiters, 1 for a main "
        "exploiter, 0.25 for a league exploiter. 0: never. Set through a policies entry "
        "(the league job's loop resets it); a run without a policies section refuses it.",
        0.0)
    ratings: Literal["elo", "openskill"] = doc(
        "How hpcrl league rates the league's members from matches.csv: 'elo' (K 16, start "
        "1200) or 'openskill' (Plackett-Luce, TrueSkill-like; pip install openskill).", "elo")
