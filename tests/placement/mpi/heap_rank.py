"""``hpcrl`` with a heap census on every rank (see ``tests/heap_probe.py``).

Each rank counts the calls of ``Collector.collect`` (a collector's rollouts or chunks),
``GradientWorker.gradients`` and ``ReplayLearner.train`` (a
learner's updates or rounds of gradient steps), takes a census at the calls named by
``HPCRL_TEST_HEAP_CALLS`` ("FIRST,LAST") and writes ``rank<N>.json`` into
``HPCRL_TEST_HEAP_DIR`` when the job ends.
"""
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/

from heap_probe import HeapProbe  # noqa: E402

from hpcrl.cli import main  # noqa: E402
from hpcrl.collection.collector import Collector  # noqa: E402
from hpcrl.learning.gradient_worker import GradientWorker  # noqa: E402
from hpcrl.learning.replay_learner import ReplayLearner  # noqa: E402

FIRST, LAST = (int(n) for n in os.environ["HPCRL_TEST_HEAP_CALLS"].split(","))
PROBES = {"collect": HeapProbe(Collector, "collect", FIRST, LAST),
          "gradients": HeapProbe(GradientWorker, "gradients", FIRST, LAST),
          "train": HeapProbe(ReplayLearner, "train", FIRST, LAST)}


def report() -> None:
    out = {}
    for name, probe in PROBES.items():
        f = probe.figures
        if f.calls:
            out[name] = {"calls": f.calls, "growth": f.growth() if f.last else None,
                         "types": f.grown_types() if f.last else ""}
    path = Path(os.environ["HPCRL_TEST_HEAP_DIR"]) / f"rank{os.environ.get('PMI_RANK', '0')}.json"
    path.write_text(json.dumps(out))


if __name__ == "__main__":
    try:
        main()
    finally:
        report()
