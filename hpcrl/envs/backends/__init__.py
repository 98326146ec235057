"""Vector-env backends: who steps a collector's envs (``env.backend``).

Each backend is one module here holding its :class:`~hpcrl.envs.backends.backend.Backend`
record (how it makes a collector's vector env, where it cannot serve a config, whether
``env.backend=auto`` picks it), which the module registers in
:data:`~hpcrl.envs.backends.backend.BACKENDS`: adding a backend is one module and nothing
else (:mod:`hpcrl.envs.registry`). This package's own module imports nothing.
"""
