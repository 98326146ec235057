"""A stand-in for the ``wandb`` package in tests (tests/fakes on sys.path): it records what
hpcrl asks of it, one JSON line per call, in the file $FAKE_WANDB_LOG."""
from __future__ import annotations

import json
import os
from typing import Any


def _record(call: str, **data: Any) -> None:
    with open(os.environ["FAKE_WANDB_LOG"], "a") as f:
        f.write(json.dumps({"call": call, **data}, default=str) + "\n")


class Run:
    """What ``wandb.init`` returns: the calls hpcrl makes on a run."""

    def define_metric(self, name: str, step_metric: str | None = None) -> None:
        _record("define_metric", name=name, step_metric=step_metric)

    def log(self, data: dict[str, Any]) -> None:
        _record("log", data=data)

    def finish(self) -> None:
        _record("finish")


def init(**kwargs: Any) -> Run:
    _record("init", **{k: v for k, v in kwargs.items() if k != "config"},
            config_seed=kwargs.get("config", {}).get("seed"))
    return Run()
