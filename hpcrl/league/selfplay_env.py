"""A multi-agent game seen from one trained policy: the other seats are played by the league.

``SelfPlayEnv`` is a Gymnasium env, so every collector, vectorisation, scheme and checkpoint
of hpcrl runs it unchanged. Each match:

1. the trained policy takes seat ``match mod seats`` (it plays every seat in turn: one
   shared policy for identical agents);
2. the other seats get one opponent, drawn **when the match starts** by the
   :class:`~hpcrl.league.opponents.OpponentSampler` from the snapshots of the policies in
   ``versus`` (all, when empty), or the fixed ``opponent`` of an evaluation env: an
   opponent never changes inside a match, and the trained policy's trajectory of a match
   is against one opponent only (the env is reset between, which resets a recurrent
   state);
3. the trained policy sees its seat's observation, flattened, with its legal-move mask as
   the last values (``actor.action_mask`` reads it there), and receives every reward its
   seat got since its last move, the rewards of the opponents' turns included;
4. the finished match is logged (:mod:`~hpcrl.league.match_log`) and counted in the
   sampler's win rates.

Snapshots are read from ``league_dir`` (``$HPCRL_LEAGUE_DIR`` when not given, which a run
sets to ``RUN/league``). The state
(:meth:`get_state`) holds the seed sequence, the match under way as the moves played since
its seed (a board game replays them exactly on a resume), the sampler and the log's length.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from hpcrl.envs.multiagent.matches import zero_sum_outcomes
from hpcrl.envs.multiagent.named_envs import MultiAgentEnvError, adapt, make_pettingzoo
from hpcrl.envs.multiagent.seats import SeatEnv, SeatSpace, SeatStep, seat_space
from hpcrl.envs.multiagent.seeding import episode_seed
from hpcrl.league.match_log import MatchLog, MatchRow, now
from hpcrl.league.opponents import LATEST, RANDOM, OpponentSampler
from hpcrl.league.players import Players
from hpcrl.league.snapshots import PLAYER, snapshots

LEAGUE_DIR_VARIABLE = "HPCRL_LEAGUE_DIR"


def flat_space(space: SeatSpace) -> gym.spaces.Box:
    """The trained policy's observation space: the seat's observation flattened, then its
    legal-move mask (one value per move)."""
    observed = space.observation_space
    if not isinstance(observed, gym.spaces.Box) or space.mask_size is None:
        raise MultiAgentEnvError(f"self-play takes games of Box observations and Discrete "
                                 f"moves; this one has {observed} and {space.action_space}")
    low = np.concatenate([np.asarray(observed.low, np.float32).ravel(),
                          np.zeros(space.mask_size, np.float32)])
    high = np.concatenate([np.asarray(observed.high, np.float32).ravel(),
                           np.ones(space.mask_size, np.float32)])
    return gym.spaces.Box(low, high, dtype=np.float32)


def flat_obs(obs: Any, mask: np.ndarray) -> np.ndarray:
    """A seat's observation flattened, with its mask as the last values (float32)."""
    return np.concatenate([np.asarray(obs, np.float32).ravel(), mask.astype(np.float32)])


class SelfPlayEnv(gym.Env):
    """See the module. ``game``: a multi-agent env name (:mod:`~hpcrl.envs.multiagent.
    named_envs`) made with ``game_kwargs``; ``opponent``: a fixed opponent (an evaluation
    env's: ``random``, ``module:Class`` or a snapshot name) in place of the sampler."""

    metadata: dict[str, Any] = {"render_modes": ["rgb_array"], "render_fps": 2}

    def __init__(self, game: str, game_kwargs: dict[str, Any] | None = None,
                 opponents: str = "pfsp", pfsp_weighting: str = "hard",
                 latest_fraction: float = 0.0, opponent: str = "", player: str = PLAYER,
                 league_dir: str = "", versus: tuple[str, ...] = ()) -> None:
        self.game, self.game_kwargs = game, dict(game_kwargs or {})
        self.render_mode = self.game_kwargs.get("render_mode")  # the game renders itself
        probe = make_pettingzoo(game, **self.game_kwargs)
        seats = tuple(probe.possible_agents)
        spaces = [seat_space(probe.observation_space(s), probe.action_space(s)) for s in seats]
        probe.close()
        first = flat_space(spaces[0])
        for seat, space in zip(seats, spaces, strict=True):
            if flat_space(space) != first or space.action_space != spaces[0].action_space:
                raise MultiAgentEnvError(f"self-play shares one policy over every seat of "
                                         f"'{game}', but seat '{seat}' has other spaces")
        self.observation_space = first
        self.action_space = spaces[0].action_space
        self._moves_count = int(spaces[0].mask_size or 0)
        self.opponents, self.pfsp_weighting = opponents, pfsp_weighting
        self.latest_fraction, self.fixed, self.player = latest_fraction, opponent, player
        self.versus = frozenset(versus)  # the policies whose snapshots it draws (empty: all)
        folder = league_dir or os.environ.get(LEAGUE_DIR_VARIABLE, "")
        self.league_dir = Path(folder) if folder else None
        self.players = Players(self.league_dir)
        self.seats: SeatEnv | None = None
        self.sampler: OpponentSampler | None = None
        self.log: MatchLog | None = None
        self.rng = np.random.default_rng(0)
        self.env_seed = 0
        self._next: SeatStep | None = None  # the next match, started when the last ended
        self._step: SeatStep | None = None
        self._moves: list[dict[str, int]] = []  # the match under way, since its seed
        self.seat, self.opponent = "", ""
        # the job's env steps at the start of this and of the last collection (JOB_CLOCK);
        # None until a collector says (an evaluation env: every snapshot there is)
        self._clock: int | None = None
        self._horizon: int | None = None

    # --- gymnasium ---------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start the next match: the trained policy's seat, an opponent, and the opponents'
        moves up to the trained policy's first."""
        super().reset(seed=seed)
        if self.seats is None:
            self._open(0 if seed is None else int(seed))
        assert self.seats is not None
        step = self._next if self._next is not None else self.seats.reset()
        self._next = None
        self._begin_match()
        return self._to_player(step)[0], {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """The trained policy's move, then the opponents' up to its next move or the match's
        end; the reward is what its seat received in between."""
        assert self._step is not None, "step() before reset()"
        move = int(action)
        return self._play({self.seat: move})

    def render(self) -> Any:
        """The game's own frame (``env.kwargs: {render_mode: rgb_array}``, as a video asks)."""
        return None if self.seats is None else self.seats.env.render()

    def close(self) -> None:
        """Close the game."""
        if self.seats is not None:
            self.seats.close()

    def hpcrl_job_clock(self, env_steps: int) -> None:
        """The job's env steps as a collection starts (its collector's call,
        :data:`~hpcrl.envs.vector.JOB_CLOCK`). A snapshot joins this env's opponents at the
        first collection after the one it was published in (its env steps at most the last
        collection's start): by then the learner has published it under every scheme whose
        collection waits for the learner (serial, collector ranks, DD-PPO), so the matches
        do not depend on when the file appeared, and a seeded run repeats to the bit."""
        self._horizon, self._clock = self._clock, int(env_steps)

    # --- the state of a checkpoint -------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        """Plain data: the seed sequence, the match under way (its moves), the sampler, the
        generator and the match log's length."""
        assert self.seats is not None and self.sampler is not None
        return {"env_seed": self.env_seed, "seeds": self.seats.seeds.state(),
                "moves": [dict(m) for m in self._moves], "seat": self.seat,
                "opponent": self.opponent, "sampler": self.sampler.state(),
                "rng": self.rng.bit_generator.state,
                "log": -1 if self.log is None else self.log.length(),
                "next": self._next is not None, "clock": [self._horizon, self._clock]}

    def set_state(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`get_state`'s data: the match under way is replayed move by
        move from its seed, and the match log is cut back to the checkpoint's length."""
        if self.seats is None:
            self._open(int(state["env_seed"]))
        assert self.seats is not None and self.sampler is not None
        seeds = dict(state["seeds"])
        pending = bool(state["next"])  # the match after the last one started already
        seeds["episode"] = int(seeds["episode"]) - 1  # start the match under way again
        self.seats.seeds.load_state(seeds)
        step = self.seats.reset()
        if pending:
            self._next = step
        else:
            self.seat, self.opponent = state["seat"], state["opponent"]
            for moves in state["moves"]:
                step = self.seats.step(moves)
            self._moves = [dict(m) for m in state["moves"]]
            self._step = step
        self.sampler.load_state(state["sampler"])
        self.rng.bit_generator.state = state["rng"]
        # (a checkpoint from before the clock: every snapshot there is, as then)
        self._horizon, self._clock = state.get("clock", [None, None])
        if self.log is not None and int(state["log"]) >= 0:
            self.log.cut_to(int(state["log"]))

    # --- the match ---------------------------------------------------------------------
    def _open(self, seed: int) -> None:
        """Make the game for the env of first seed ``seed`` (its identity in the logs)."""
        self.env_seed = seed
        self.seats = adapt(make_pettingzoo(self.game, **self.game_kwargs), seed, 0)
        self.sampler = OpponentSampler(self.opponents, self.pfsp_weighting,  # type: ignore[arg-type]
                                       self.latest_fraction, episode_seed(seed, 0, 1))
        self.rng = np.random.default_rng(episode_seed(seed, 1, 1))
        if self.league_dir is not None and not self.fixed:
            self.log = MatchLog(self.league_dir, seed)

    def _begin_match(self) -> None:
        """The trained policy's seat and the opponent of the match that just started."""
        assert self.seats is not None and self.sampler is not None
        seats = self.seats.seats
        self.seat = seats[self.seats.episode % len(seats)]
        league = ([snap.name for snap in snapshots(self.league_dir, self._league_upto())
                   if not self.versus or snap.policy in self.versus]
                  if self.league_dir is not None and self.fixed in ("", LATEST) else [])
        if self.fixed == LATEST:  # the newest snapshot at the match's start
            self.opponent = league[-1] if league else RANDOM
        elif self.fixed:
            self.opponent = self.fixed
        else:
            self.opponent = self.sampler.choose(league)
        self._moves = []

    def _league_upto(self) -> int | None:
        """The newest env steps of a snapshot this env may draw now: none before its
        collector's second collection, every one where no collector tells the clock."""
        if self._clock is None:
            return None
        return -1 if self._horizon is None else self._horizon

    def _to_player(self, step: SeatStep) -> tuple[np.ndarray, SeatStep]:
        """Play the opponents' moves until the trained policy acts; its observation."""
        self._step = step
        while self.seat not in step.acting:
            step = self._opponents_move(step, {})
            if step.ended is not None:  # (a game the trained policy never acted in)
                raise MultiAgentEnvError(f"a match of '{self.game}' ended before seat "
                                         f"'{self.seat}' acted")
        mask = step.masks[self.seat]
        assert mask is not None
        return flat_obs(step.obs[self.seat], mask), step

    def _opponents_move(self, step: SeatStep, moves: dict[str, int]) -> SeatStep:
        """One env step: ``moves`` and the opponent's move for each other acting seat."""
        assert self.seats is not None
        player = self.players.get(self.opponent)
        for seat in step.acting:
            if seat != self.seat:
                mask = step.masks[seat]
                assert mask is not None
                moves[seat] = player.act(flat_obs(step.obs[seat], mask), mask, self.rng)
        self._moves.append(dict(moves))
        step = self.seats.step(moves)
        self._step = step
        return step

    def _play(self, moves: dict[str, int]) -> tuple[np.ndarray, float, bool, bool,
                                                      dict[str, Any]]:
        """Step from the trained policy's ``moves`` to its next move or its match's end."""
        assert self._step is not None
        step = self._opponents_move(self._step, moves)
        reward, done = 0.0, None
        while True:
            result = step.results.get(self.seat)
            if result is not None:
                reward += result.reward
                if result.terminated or result.truncated:
                    done = result
            if step.ended is not None:
                self._finish(step)
                assert done is not None  # the match's end ends every seat's
                self._next = step
                obs = np.zeros(self.observation_space.shape or (), np.float32)
                if done.final_obs is not None:
                    obs = flat_obs(done.final_obs, np.zeros(self._moves_count, bool))
                return obs, reward, done.terminated, done.truncated, {}
            if self.seat in step.acting and done is None:
                mask = step.masks[self.seat]
                assert mask is not None
                return flat_obs(step.obs[self.seat], mask), reward, False, False, {}
            step = self._opponents_move(step, {})

    def _finish(self, step: SeatStep) -> None:
        """Count and log the match that just ended."""
        end = step.ended
        assert end is not None and self.sampler is not None
        outcomes = zero_sum_outcomes(end)
        outcome = None if outcomes is None else outcomes.get(self.seat)
        if not self.fixed:
            self.sampler.record(self.opponent, outcome)
        if self.log is not None:
            others = "+".join(s for s in end.seats if s != self.seat)
            self.log.append(MatchRow(now(), self.env_seed, end.episode, end.seed, self.player,
                                     self.seat, self.opponent, others, outcome or "",
                                     end.returns.get(self.seat, 0.0), end.length))
