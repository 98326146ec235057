"""The typed configuration of an hpcrl run.

Every field carries its documentation in ``metadata["doc"]`` (see :func:`doc`), which
``hpcrl config show --docs`` prints and the error messages quote. Values are checked by
:mod:`hpcrl.config.validate` before any rank starts work.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from hpcrl.field_docs import doc
from hpcrl.sections.algorithm_keys import (
    DdpgConfig,
    DqnConfig,
    ImpalaConfig,
    MpcConfig,
    MpoConfig,
    PpoConfig,
    SacConfig,
    Td3Config,
)
from hpcrl.sections.league_section import LeagueConfig
from hpcrl.sections.offpolicy import ReplayConfig
from hpcrl.sections.pbt_section import PbtConfig
from hpcrl.sections.policy_addons import PolicyAddonsConfig
from hpcrl.sections.rnd_section import RndConfig


@dataclass
class AtariConfig:
    """The Atari preprocessing of ``env.preset: atari`` (the field's standard chain, after
    Machado et al. 2018 and the DQN/PPO reference implementations). Evaluation plays whole
    games: it keeps every step except life-loss termination and reward clipping."""

    noop_max: int = doc("Up to this many no-op actions (a random number) after each reset, "
                        "so episodes start in different states (0 disables).", 30)
    frame_skip: int = doc("Each action is repeated on this many emulator frames; the "
                          "observation is the pixel-wise max of the last two (the env is "
                          "made with frameskip=1 so frames are skipped once, here).", 4)
    repeat_action_probability: float | None = doc(
        "Sticky actions: the chance that the emulator repeats the previous action instead "
        "of the new one. null keeps the id's own value: 0.25 for ALE/...-v5 ids, 0 for "
        "...NoFrameskip-v4 ids.", None)
    terminal_on_life_loss: bool = doc(
        "Training only: a lost life ends the training episode (the game goes on from there). "
        "Episode statistics and evaluation still count whole games.", True)
    fire_reset: bool = doc("Press FIRE after each reset (and after a lost life), for games "
                           "that wait for it; ignored by games without a FIRE action.", True)
    screen_size: int = doc("Observations are resized to screen_size x screen_size pixels.", 84)
    grayscale: bool = doc("Grayscale observations (false keeps RGB channels last).", True)
    frame_stack: int = doc("The last this many frames form one observation, stacked first: "
                           "[frame_stack, screen_size, screen_size] uint8.", 4)
    clip_reward: bool = doc("Training only: rewards are clipped to [-1, 1]; episode "
                            "statistics report the unclipped game score.", True)


@dataclass
class VizdoomConfig:
    """The ViZDoom chain of ``env.preset: vizdoom`` (Sample Factory's setup for its ViZDoom
    results)."""

    frame_skip: int = doc("Each action is repeated for this many game frames inside the "
                          "engine (rewards summed; skipped frames are not rendered).", 4)
    resolution: str = doc("Resolution the game renders at: 160x120, 200x150, 256x144, "
                          "320x240 or 640x480.", "160x120")
    width: int = doc("Width the screen is resized to.", 128)
    height: int = doc("Height the screen is resized to.", 72)
    frame_stack: int = doc("Screens stacked on the channel axis (1: none; a recurrent core "
                           "remembers instead).", 1)
    game_variables: bool = doc(
        "Observe the scenario's game variables (health, ammo) beside the screen, as the "
        "'gamevariables' key of a Dict observation (where the scenario has any).", True)


@dataclass
class EnvConfig:
    """Which environment is vectorised, and how."""

    id: str = doc("Gymnasium id of the environment: a registered id such as 'CartPole-v1', or "
                  "'module:EnvId' to import the module that registers it first. The ids of "
                  "hpcrl's env suites need no module (their extra installed): Atari "
                  "('ALE/Pong-v5'), MinAtar, ViZDoom, MiniGrid ('MiniGrid-DoorKey-5x5-v0'), "
                  "Crafter ('CrafterReward-v1'), DeepMind Control "
                  "('dm_control/cartpole-swingup-v0'), PyBullet ('HalfCheetahBulletEnv-v0').",
                  "CartPole-v1")
    num_envs: int = doc("Environments stepped together by each collecting process.", 8)
    vectorization: Literal["sync", "async"] = doc(
        "'sync' steps the envs in the collector's process (best for cheap envs such as "
        "CartPole); 'async' runs each env in its own subprocess (for expensive envs).", "sync")
    backend: str = doc(
        "Who steps a collector's envs, a registered backend (hpcrl.envs.backends; "
        "another name is refused naming the known ones): 'gymnasium' (Python envs, "
        "env.vectorization says "
        "where), 'envpool' (EnvPool's C++ thread pool, for the Atari, MuJoCo and "
        "classic-control ids it ships; refused with the reason elsewhere), 'auto': EnvPool "
        "for Atari games under env.preset=atari when it is installed (pip install "
        "'hpcrl[envpool]') and the config fits it, Gymnasium otherwise. Evaluation and "
        "videos always play the Gymnasium chain.", "auto")
    envpool_threads: int = doc(
        "EnvPool's threads per collecting process (0: one per env, at most the CPUs this "
        "process may use). 1 keeps to the core each rank is given.", 1)
    kwargs: dict = doc("Extra keyword arguments passed to gymnasium.make.", factory=dict)
    wrappers: list = doc(
        "Gymnasium wrappers of your own, applied in order to every env (training and "
        "evaluation) after env.preset's chain: 'module:Class' import paths, or "
        "{'module:Class': {keyword: value}} to pass arguments.", factory=list)
    preset: Literal["none", "atari", "vizdoom"] = doc(
        "Preprocessing chain: 'none' uses the env as gymnasium.make returns it; 'atari' "
        "applies the standard Atari chain of env.atari.* (an ALE id such as 'ALE/Pong-v5' or "
        "'PongNoFrameskip-v4' is needed); 'vizdoom' the ViZDoom chain of env.vizdoom.* (a "
        "ViZDoom id such as 'VizdoomHealthGathering-v1').", "none")
    atari: AtariConfig = doc("Steps of the Atari chain (env.preset=atari).", factory=AtariConfig)
    vizdoom: VizdoomConfig = doc("Steps of the ViZDoom chain (env.preset=vizdoom).",
                                 factory=VizdoomConfig)
    multiagent: bool = doc(
        "env.id names a multi-agent game, played as env.agents says: "
        "a PettingZoo env module ('pettingzoo.classic.connect_four_v3'), a registry id "
        "('classic/connect_four-v3'), 'module:function' returning a PettingZoo env, or "
        "'openspiel:<game>'. True by itself for ids that start with 'pettingzoo.' or "
        "'openspiel:'.", False)
    agents: Literal["auto", "league", "shared"] = doc(
        "Who plays the agents of a multi-agent env.id. 'shared': every agent acts with the "
        "one trained policy and all their steps train it (parameter sharing; a cooperative "
        "or simultaneous-move game, PettingZoo's Parallel API, whose agents play to the end "
        "of each game). 'league': the trained policy takes one seat per match, in turn, and "
        "the league of env.league plays the others (self-play). 'auto': shared for a "
        "Parallel env, league for a turn-based one (AEC, OpenSpiel).", "auto")
    league: LeagueConfig = doc("Self-play's opponents, snapshots and ratings "
                               "(a multi-agent env.id).", factory=LeagueConfig)
    normalize_obs: bool = doc("Normalise observations by a running mean and variance that "
                              "travels with the weights and is saved in the policy.", False)
    normalize_reward: bool = doc("Scale rewards by the running std of the discounted return.",
                                 False)
    clip_obs: float = doc("Clip normalised observations to [-clip_obs, clip_obs].", 10.0)
    clip_reward: float = doc("Clip normalised rewards to [-clip_reward, clip_reward].", 10.0)
    max_restarts: int = doc(
        "A collector's env that raises in step or reset (or, with env.vectorization=async, "
        "hangs past env.step_timeout_s or kills its subprocess) is closed and made again "
        "with a fresh seed, its unfinished episode cut as a truncation its learner treats "
        "right (docs/reliability.md: Envs that come back); counted in progress.csv's "
        "env_restarts, said once per env. This many restarts of one env within "
        "env.restart_window of its steps are allowed; one more fails its collector, naming "
        "the env and its last error. With EnvPool a failure makes its whole pool again. "
        "0: an env's error fails its collector at once.", 10)
    restart_window: int = doc(
        "Steps of one env within which env.max_restarts restarts are allowed: a flaky env "
        "(a crash now and then) comes back for ever, a broken one (a crash every few "
        "steps) fails.", 1000)
    step_timeout_s: float = doc(
        "env.vectorization=async: a collector's env whose step (reset included) has not "
        "returned after this many seconds is hung: its subprocess is killed and started "
        "again, as env.max_restarts says. Keep it below scheme.collector_timeout_s. 0: wait "
        "for ever.", 120.0)


@dataclass
class ActorConfig:
    """The networks of the agent and their action distribution."""

    hidden_sizes: list = doc("Widths of the hidden layers of each MLP trunk.",
                             factory=lambda: [64, 64])
    activation: Literal["tanh", "relu", "elu"] = doc("Activation between hidden layers.", "tanh")
    shared_trunk: bool = doc("One trunk feeds both the policy and the value head (True) or "
                             "each has its own MLP (False).", False)
    ortho_init: bool = doc("Orthogonal initialisation (gain sqrt(2) in the trunk, 0.01 for the "
                           "policy head, 1 for the value head).", True)
    log_std_init: float = doc("Initial log standard deviation of Gaussian actions.", 0.0)
    encoder: Literal["mlp", "nature_cnn", "impala_resnet"] = doc(
        "First stage of every network: 'mlp' takes the observation's values (integer parts "
        "one-hot encoded); 'nature_cnn' (Mnih et al. 2015) and 'impala_resnet' (Espeholt et "
        "al. 2018, 16-32-32 residual stacks) take image observations [C, H, W] or [H, W, C], "
        "uint8 pixels scaled to [0, 1] inside the network. A Dict observation gets one encoder "
        "per key: 3-D keys this image encoder, the other keys (all keys under 'mlp') their "
        "values. actor.hidden_sizes are MLP layers after the encoder ([] for none).", "mlp")
    features: int = doc("Output width of the image encoders (their last linear layer).", 512)
    encoder_init: Literal["default", "fixup"] = doc(
        "Initialisation of the image encoder: 'default' (orthogonal with actor.ortho_init), "
        "or 'fixup' for actor.encoder=impala_resnet: Fixup residual blocks (Zhang et al. "
        "2019; the seed's IMPALA ResNet), scalar biases and multipliers, the second "
        "convolution of each block zero so every block starts as the identity.", "default")
    network: str = doc(
        "Your own encoder as 'module:Class', in place of actor.encoder: called as "
        "Class(observation_space, **actor.network_kwargs), an nn.Module with an int attribute "
        "'features' whose forward maps a batch of observations [B, *shape] (as the env gives "
        "them, normalised when env.normalize_obs) to [B, features]; the memory core, the MLP "
        "trunk and the heads follow as usual. Box observations, ppo/a2c/impala (and their "
        "subclasses), actor.encoder left at mlp. Empty: the built-in encoder.", "")
    network_kwargs: dict = doc("Keyword arguments of actor.network, checked against its "
                               "signature.", factory=dict)
    action_mask: bool = doc(
        "The observation's last values are the legal-move mask (one per move of a Discrete "
        "action, 1 legal, 0 illegal), as a self-play env of a multi-agent game gives them: "
        "illegal moves get probability 0 when acting, in the loss and in evaluation. Flat "
        "Box observations, env.normalize_obs false.", False)
    memory: Literal["none", "gru", "lstm"] = doc(
        "Memory core between the encoder and the MLP trunk: 'gru' or 'lstm' give the agent a "
        "recurrent state that collectors carry across rollouts, reset at each episode's start "
        "and ship with every rollout, and that the loss recomputes over whole sequences (see "
        "algo.bptt_len); one core feeds both heads with actor.shared_trunk, each head has its "
        "own otherwise. On-policy algorithms only (ppo, a2c, impala).", "none")
    memory_size: int = doc("Units of each layer of the memory core.", 256)
    memory_layers: int = doc("Stacked layers of the memory core.", 1)
    channels: Literal["auto", "first", "last"] = doc(
        "Where the image encoders find the channels: 'auto' (channels-last when the last "
        "dimension is no larger than the first: RGB frames, MinAtar), 'first' or 'last'.",
        "auto")
    compute_dtype: Literal["float32", "bfloat16"] = doc(
        "Number format of the image encoders (nature_cnn, impala_resnet): 'bfloat16' runs their "
        "convolutions and linear layer under torch.autocast, on learners and collectors alike: "
        "forward and backward of the Nature CNN 1.9x faster on a CPU with AVX512-BF16 or AMX "
        "(docs/envs.md: Networks), the tensor-core path on a GPU (a device without native "
        "bfloat16 gets a warning: it would be slower). The weights and their gradients, the "
        "optimiser, the all-reduce, the memory core, trunk, heads and losses and the checkpoints "
        "stay float32, so a policy trained either way loads into the other. Needs an image "
        "encoder; a network of your own can use torch.autocast in its forward.",
        "float32")


@dataclass
class AlgoConfig:
    """The learning algorithm and its hyperparameters."""

    name: str = doc(
        "Algorithm: 'ppo' (clipped surrogate), 'a2c', 'impala' (actor-critic with V-trace "
        "targets, see algo.impala.*), or the off-policy 'dqn', 'sac', 'td3', 'ddpg', 'mpo' "
        "(replay.*) and 'mpc' (model-predictive control over a learned world model, "
        "algo.mpc.*); or your own as 'module:Class', a subclass of hpcrl.PPO, hpcrl.A2C, "
        "hpcrl.IMPALA or hpcrl.OnPolicyAlgorithm, or of hpcrl.DQN, hpcrl.SAC, hpcrl.TD3, "
        "hpcrl.DDPG, hpcrl.MPO, hpcrl.MPC or hpcrl.OffPolicyAlgorithm (it runs wherever its "
        "base runs, with its base's defaults, and may declare a config section of its own, "
        "algo.<section>; docs/components.md: Writing your own components). Keys "
        "you leave unset whose good value depends on the algorithm take its standard values "
        "(hpcrl/config/algo_defaults.py); the defaults shown here are PPO's.",
        "ppo")
    kwargs: dict = doc("Keyword arguments of a plug-in algorithm's constructor (algo.name="
                       "'module:Class'), checked against its signature.", factory=dict)
    num_steps: int = doc("Steps collected per env between updates (rollout length).", 32)
    gamma: float = doc("Discount factor.", 0.98)
    gae_lambda: float = doc("GAE lambda: 1 gives Monte-Carlo advantages, 0 one-step TD.", 0.8)
    lr: float = doc("Initial learning rate.", 1e-3)
    lr_schedule: Literal["constant", "linear"] = doc(
        "'linear' decays the learning rate to 0 over train.total_env_steps.", "linear")
    ent_coef: float = doc("Weight of the entropy bonus.", 0.0)
    vf_coef: float = doc("Weight of the value loss.", 0.5)
    max_grad_norm: float = doc("Clip the global gradient norm to this value (0 disables).", 0.5)
    normalize_advantage: bool = doc("Normalise advantages per minibatch.", True)
    bptt_len: int = doc(
        "Recurrent actors (actor.memory): the loss recomputes the memory over sequences of "
        "this many steps, each from the state the collector stored at its start. PPO's "
        "minibatches hold the same number of whole sequences of every env, so num_steps / "
        "bptt_len must be a multiple of the minibatches per epoch. 0: the longest that works, "
        "num_steps / minibatches per epoch (whole rollouts for a2c and impala).", 0)
    optimizer: Literal["adam", "rmsprop"] = doc("Optimiser of the update.", "adam")
    optimizer_eps: float = doc("Epsilon of the optimiser's denominator.", 1e-5)
    addons: PolicyAddonsConfig = doc(
        "Policy-loss add-ons of the on-policy algorithms (ppo, a2c, impala): KL attraction "
        "to or repulsion from other trained policies, reward and return predictors.",
        factory=PolicyAddonsConfig)
    ppo: PpoConfig = doc("PPO's own keys.", factory=PpoConfig)
    impala: ImpalaConfig = doc("IMPALA's own keys.", factory=ImpalaConfig)
    dqn: DqnConfig = doc("DQN's own keys.", factory=DqnConfig)
    ddpg: DdpgConfig = doc("DDPG's own keys.", factory=DdpgConfig)
    td3: Td3Config = doc("TD3's own keys.", factory=Td3Config)
    sac: SacConfig = doc("SAC's own keys.", factory=SacConfig)
    mpo: MpoConfig = doc("MPO's own keys.", factory=MpoConfig)
    mpc: MpcConfig = doc("MPC's own keys (its world model and planner).", factory=MpcConfig)


@dataclass
class WandbConfig:
    """Weights & Biases logging of the progress rows (rank 0 only; needs ``pip install
    wandb``). Off while ``project`` is empty."""

    project: str = doc("W&B project the run logs to; empty: no W&B.", "")
    entity: str = doc("W&B entity (user or team); empty: your default entity.", "")
    group: str = doc("W&B group, e.g. one per sweep; empty: none.", "")
    mode: Literal["offline", "online"] = doc(
        "'offline' (default: compute nodes rarely reach the internet) writes the run under "
        "RUN_DIR/wandb for `wandb sync RUN_DIR/wandb/offline-run-*` later; 'online' streams "
        "it.", "offline")


@dataclass
class TrainConfig:
    """How long to train, and what is recorded."""

    total_env_steps: int = doc("Environment steps to train for, summed over all envs.", 100_000)
    eval_episodes: int = doc("Deterministic episodes run at the end of training (0 skips).", 10)
    eval_max_episode_steps: int = doc(
        "Steps after which an evaluation episode (the final one, train.eval_every's, hpcrl "
        "eval and its videos) is cut and counted as truncated, since a deterministic policy "
        "can walk into a wall forever. 0: the env's own time limit (its max_episode_steps), "
        "and 27,000 steps for an env without one (Atari's 30 minutes of play at frame skip "
        "4). hpcrl eval --max-episode-steps overrides it.", 0)
    checkpoint_every: int = doc("Write a checkpoint every this many updates (and at the end).",
                                50)
    checkpoint_every_s: float = doc(
        "Also write a checkpoint once this many seconds of training passed since the last "
        "one (0: by updates alone). It bounds what a crash, a kill of the learner or a lost "
        "node can cost when updates are long, whatever train.checkpoint_every says.", 600.0)
    log_interval_s: float = doc("Seconds between progress lines on the console.", 5.0)
    device: str = doc("Device of the learner: 'auto', 'cpu', 'cuda' or 'cuda:N'.", "cpu")
    torch_threads: int = doc("Threads of torch's intra-op work and of numpy's BLAS per process "
                             "(0 keeps the libraries' defaults).", 1)
    tensorboard: bool = doc("Write TensorBoard event files when tensorboard is installed.", True)
    compile: bool = doc(
        "Compile the learner's loss (forward and backward) and the inference ranks' forward "
        "with torch.compile, with CUDA graphs on a GPU (mode reduce-overhead). It pays where "
        "a network's many small kernels cost more to launch than to run (small batches on a "
        "GPU); the first updates wait for the compilation. Collectors that act in numpy (a "
        "feedforward MLP on the CPU) are not compiled: numpy is faster there. On a CPU it "
        "needs a C++ compiler (torch's inductor builds its kernels with one).", False)
    deterministic: Literal["auto", True, False] = doc(
        "Weights that depend on the config and seed alone, to the bit: every run of the job "
        "gives the same, and so does every layout of its envs whose gradients one learner "
        "computes (one process; collector ranks feeding one gradient worker through shared "
        "memory or messages, lz4 or not; acting on them or on inference ranks, in any env "
        "groups). It takes acting forwards that compute each env's row on its own (numpy "
        "MLPs) or, on an inference rank, over one request at a time (other networks); the "
        "learner's minibatches hold their rows in one order whatever the layout. 'auto': so "
        "wherever neither timing nor a GPU decides the weights (synchronous collection and "
        "gradients, no preemption, CPUs), but an inference rank serving a network of torch "
        "kernels (memory cores, image encoders) still batches whatever requests are ready, "
        "which 1 request at a time would slow (a Nature CNN's 16 rows take 1.5x the time in "
        "4 forwards); several gradient workers repeat their own weights run to run, but "
        "their all-reduce rounds otherwise than one learner. true: all of it, and a layout "
        "that cannot keep the promise (asynchronous collection or gradients, DD-PPO "
        "preemption, a GPU, several gradient workers) is refused before any rank starts. "
        "false: never paid for (an inference rank batches whatever requests are ready into "
        "one forward, numpy forwards multiply whole batches).", "auto")
    eval_every: int = doc(
        "Env steps between deterministic evaluations of train.eval_episodes episodes during "
        "training (0: the final one only). Each adds a row to eval.csv and the best policy so "
        "far is kept as checkpoints/best.pt (hpcrl eval --best). They run in a thread of rank "
        "0 on a copy of the weights, so training goes on meanwhile.", 0)
    keep_checkpoints: int = doc(
        "Checkpoints kept on disk: checkpoints/last.pt, and with K > 1 the last K also as "
        "checkpoints/steps-<env steps>.pt (each a full checkpoint: hpcrl eval takes its path).",
        1)
    wandb: WandbConfig = doc("Weights & Biases logging (off by default).", factory=WandbConfig)
    on_nonfinite: Literal["stop", "skip_update"] = doc(
        "What a NaN or infinite loss term or gradient does: 'stop' ends the run with a message "
        "naming the loss term or optimiser step and the last good checkpoint; 'skip_update' "
        "drops that gradient step (weights, optimiser and targets stay as they were) and counts "
        "it in the progress.csv column skipped_updates. Non-finite observations or rewards "
        "from an env always stop the run, naming the env and its step: the env is broken, and "
        "dropping its data would only hide that while its episodes go on.", "stop")


@dataclass
class PreemptionConfig:
    """DD-PPO straggler preemption of synchronous collection (1.0 and 1.0: wait for all)."""

    fraction_workers: float = doc(
        "A synchronous collection step may end once this fraction of the collecting ranks of "
        "a group finished their rollout ...", 1.0)
    fraction_samples: float = doc(
        "... and then each straggler stops as soon as it collected this fraction of its "
        "steps (it never stops before).", 1.0)


@dataclass
class SchemeConfig:
    """How the training roles map onto MPI ranks (``hpcrl plan`` prints the rank table)."""

    preset: Literal["serial", "a2c", "ddppo", "a3c", "async-ppo", "impala", "apex",
                    "async-sac"] = doc(
        "Named topology whose keys fill in every scheme key you do not set yourself: 'serial' "
        "(1 process), 'a2c' (parallel synchronous collectors), 'ddppo' (synchronous "
        "decentralised, with preemption), 'a3c' (asynchronous gradient workers, central "
        "updater), 'async-ppo' (asynchronous collection with a bounded policy lag), "
        "'impala' (asynchronous collectors, V-trace learner: algo.name=impala), 'apex' "
        "(asynchronous collectors with per-collector epsilon feeding a prioritised replay "
        "with collector-computed priorities: algo.name=dqn), 'async-sac' (collectors "
        "streaming transitions into the learner's replay: algo.name=sac). The last three "
        "also default the algo.* and replay.* keys of their agent.",
        "serial")
    gradient_workers: int = doc("Ranks that turn rollouts into gradients.", 1)
    collectors_per_worker: int = doc(
        "Collector ranks feeding each gradient worker; 0 = each gradient worker collects "
        "itself (env.num_envs envs on every collecting rank).", 0)
    collection: Literal["sync", "async"] = doc(
        "'sync': a gradient worker trains on one rollout from each of its collectors per "
        "update; 'async': collectors never wait, the worker takes rollouts as they arrive.",
        "sync")
    preemption: PreemptionConfig = doc("Straggler preemption thresholds.",
                                       factory=PreemptionConfig)
    gradients: Literal["sync", "async"] = doc(
        "'sync': every gradient step combines all gradient workers; 'async': the updater "
        "applies each worker's gradient as it arrives (needs update=central).", "sync")
    update: Literal["central", "decentralized"] = doc(
        "'central': an updater rank applies gradients and publishes weights; "
        "'decentralized': gradient workers all-reduce their gradients and each applies them.",
        "decentralized")
    allreduce: Literal["auto", "nccl", "gloo", "mpi"] = doc(
        "Backend of the decentralised gradient all-reduce; 'auto' takes nccl on GPUs and "
        "measures gloo against MPI on CPUs.", "auto")
    max_policy_lag: int = doc(
        "Asynchronous collection: a rollout collected with weights more than this many "
        "updates old is dropped instead of trained on.", 4)
    min_collectors: int = doc(
        "Asynchronous collection under an MPI that survives a lost rank (Open MPI 5 with `mpiexec "
        "--with-ft ulfm`; docs/reliability.md: Lost collectors): the job goes on without a "
        "collector rank that died or hung, until fewer than this many collector ranks are live; "
        "then it checkpoints and stops with exit status 3, which the Slurm templates "
        "requeue on, and the resumed job starts at its full size again.", 1)
    collector_timeout_s: float = doc(
        "A collector rank whose next rollout (or transition chunk, or checkpoint state) "
        "has not arrived this many seconds after its learner began waiting for it is "
        "lost: hung, stopped or cut off. Where the MPI survives a lost rank, the learner "
        "kills it if it shares the learner's node and goes on without it; elsewhere the "
        "job ends at once, naming the rank (instead of waiting for it until the time "
        "limit). 0: wait for ever.", 300.0)
    max_collector_restarts: int = doc(
        "Asynchronous collection under an MPI that survives a lost rank (Open MPI 5 with "
        "`mpiexec --with-ft ulfm`): a collector rank that dies or hangs is replaced while the "
        "job runs, at most this many times. The job starts with this many spare ranks "
        "(idle, after the collectors: the world grows by it, as `hpcrl plan` shows); a spare "
        "takes the lost rank's place (its envs, from fresh seeds, and its slot at its "
        "learner), gets the newest weights and collects within a second or so. Past the "
        "bound scheme.min_collectors applies (docs/reliability.md: Collectors that come "
        "back). 0: lost collectors stay lost.", 0)
    evaluators: int = doc(
        "Ranks that evaluate while the learners train (after the spares in the rank table, "
        "on the CPU; `hpcrl plan` shows them): each time train.eval_every env steps passed, "
        "rank 0 hands the newest weights to a free evaluator (never waiting for one: while "
        "all are busy only the newest weights wait), which plays train.eval_episodes "
        "deterministic episodes and sends the result back; rank 0 keeps eval.csv and "
        "checkpoints/best.pt as its evaluation thread does, and that thread does not run. "
        "Needs train.eval_every > 0 and a job of several ranks (docs/evaluation.md). "
        "0: rank 0 evaluates in a thread.", 0)
    collector_device: str = doc("Device of collector ranks' policy copies ('cpu' or 'cuda').",
                                "cpu")
    inference_ranks: int = doc(
        "Ranks that act for the collectors: each holds the policy and serves a fixed group "
        "of its gradient worker's collectors, batching the observations that arrived into "
        "one forward and sending back actions, log-probs, values and recurrent state. A "
        "multiple of scheme.gradient_workers, at most one per collector; 0: every collector "
        "acts with its own policy copy.", 0)
    inference_device: str = doc(
        "Device of the inference ranks: 'auto' (the node's GPU where there is one, else the "
        "CPU), 'cpu', 'cuda' or 'cuda:N' (refused where there is no GPU).", "auto")
    env_groups: int = doc(
        "Groups each collecting rank's envs are cut into, taking turns (Sample Factory's "
        "double-buffered sampling): while one group's actions are computed (on an inference "
        "rank, or here while the other group's envs step in subprocesses or EnvPool's "
        "threads), another group steps, so neither the envs nor the acting wait for each "
        "other. 1: every env steps together, as one batch. 0 (auto): 2 where acting and "
        "stepping can overlap (scheme.inference_ranks > 0, env.vectorization=async, or "
        "EnvPool) and env.num_envs is even, else 1. A number must divide env.num_envs; the "
        "rollouts, and a synchronous job's weights, are the same whatever the grouping.", 0)
    transport: Literal["auto", "shared", "messages"] = doc(
        "How a collector's rollouts (or transition chunks) reach its learner and its "
        "observations and actions reach its inference rank: 'auto' through a shared-memory "
        "window (MPI-3) between ranks of one node, written once and read in place, and as "
        "MPI messages across nodes or where the node's /dev/shm lacks room; 'shared' the "
        "same, but refused where a collector and its peer are on different nodes or "
        "/dev/shm lacks room; 'messages' MPI messages everywhere.", "auto")
    compress: Literal["none", "lz4"] = doc(
        "Lossless compression of what crosses ranks as messages: collectors' rollouts and "
        "transition chunks, and the weights sent to collectors, inference ranks and "
        "asynchronous gradient workers. 'lz4' pays off where the network is slower than a "
        "core's lz4 (pixel rollouts compress well, float weights hardly); shared memory "
        "within a node is never compressed. Needs the lz4 package (pip install "
        "'hpcrl[lz4]').", "none")


@dataclass
class Config:
    """A whole run: the agent's components and how long to train it."""

    seed: int = doc("Seed of everything: env i is seeded with seed + i, networks with seed.", 0)
    env: EnvConfig = doc("Environment settings.", factory=EnvConfig)
    actor: ActorConfig = doc("Network settings.", factory=ActorConfig)
    algo: AlgoConfig = doc("Algorithm settings.", factory=AlgoConfig)
    train: TrainConfig = doc("Training-loop settings.", factory=TrainConfig)
    replay: ReplayConfig = doc("Off-policy settings (dqn, sac, td3, ddpg, mpo).",
                               factory=ReplayConfig)
    rnd: RndConfig = doc("Random Network Distillation's exploration bonus (ppo, a2c).",
                         factory=RndConfig)
    scheme: SchemeConfig = doc("Placement of the roles on MPI ranks.", factory=SchemeConfig)
    pbt: PbtConfig = doc("Population-based training: read by `hpcrl pbt`, which trains "
                         "pbt.members runs of this config side by side; `hpcrl train` trains "
                         "one run and says it does not read this section.", factory=PbtConfig)
    policies: dict = doc(
        "The trained policies of a self-play league job, by name (empty: one, 'main'): "
        "{name: {role, ranks, set}}. 'role': main (plays the whole league), main_exploiter "
        "(plays the mains' newest snapshots, joins at a 0.7 win rate, then starts again), or "
        "league_exploiter (plays the whole league by PFSP, joins at 0.7, starts again with "
        "probability 0.25), AlphaStar's roles; 'ranks': the MPI ranks of its own job, which "
        "trains it on the scheme (default: the launch's ranks split evenly); 'set': its own "
        "values of config keys, {dotted key: value} (algo, actor, train, scheme, replay, "
        "env.league keys, env.num_envs). Each policy is a run of its own in "
        "RUN/policies/<name>, all of them in one league, RUN/league.", factory=dict)
