"""Typed run configuration: dataclasses, YAML loading, overrides and validation."""
from hpcrl.config.loader import (
                                 ConfigError,
                                 all_keys,
                                 dump_yaml,
                                 from_dict,
                                 load_config,
                                 parse_overrides,
                                 to_dict,
)
from hpcrl.config.schema import ActorConfig, AlgoConfig, Config, EnvConfig, TrainConfig

__all__ = ["ActorConfig", "AlgoConfig", "Config", "ConfigError", "EnvConfig", "TrainConfig",
           "all_keys", "dump_yaml", "from_dict", "load_config", "parse_overrides", "to_dict"]
