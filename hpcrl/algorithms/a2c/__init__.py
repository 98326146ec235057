"""A2C (``algo.name: a2c``): its class,
:class:`~hpcrl.algorithms.a2c.advantage_actor_critic.A2C`, with its defaults. It has no
config keys of its own: every key it reads is shared (``algo.*``)."""
