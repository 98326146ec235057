"""Typed run configuration: YAML loading, overrides and validation of the config's data.

The dataclasses themselves (``Config`` and its sections) are :mod:`hpcrl.sections`, below
the components that read them; this package turns files and ``--set`` lines into a
validated ``Config``, asking the components and the scheme as it checks, and re-exports the
most used dataclasses so that ``from hpcrl.config import Config, load_config`` works."""
from hpcrl.config.loader import (
                                 ConfigError,
                                 all_keys,
                                 dump_yaml,
                                 from_dict,
                                 load_config,
                                 parse_overrides,
                                 to_dict,
)
from hpcrl.sections.schema import ActorConfig, AlgoConfig, Config, EnvConfig, TrainConfig

__all__ = ["ActorConfig", "AlgoConfig", "Config", "ConfigError", "EnvConfig", "TrainConfig",
           "all_keys", "dump_yaml", "from_dict", "load_config", "parse_overrides", "to_dict"]
