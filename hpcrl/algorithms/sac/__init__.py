"""SAC's keys, ``algo.sac.*``, torch-free; its class is
:class:`~hpcrl.algorithms.sac.soft_actor_critic.SAC`."""
from __future__ import annotations

from dataclasses import dataclass

from hpcrl.field_docs import doc


@dataclass
class SacConfig:
    """SAC's critics and entropy temperature (``algo.sac.*``)."""

    n_critics: int = doc("Critics whose minimum makes the target.", 2)
    learn_ent_coef: bool = doc("Learn the entropy temperature so the policy's entropy tracks "
                               "target_entropy (automatic temperature).", True)
    ent_coef_init: float = doc("Initial (or, without learn_ent_coef, fixed) entropy "
                               "temperature.", 1.0)
    target_entropy: float | None = doc("Entropy the temperature aims at; null uses -(action "
                                       "dimensions).", None)
