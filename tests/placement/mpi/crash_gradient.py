"""``hpcrl`` with a gradient worker that raises on the rank named by HPCRL_TEST_CRASH_RANKS."""
import os

from hpcrl.cli import main
from hpcrl.learning.gradient_worker import GradientWorker

_original = GradientWorker.gradients


def gradients(self, rollouts, update, progress):
    if os.environ.get("PMI_RANK") in os.environ.get("HPCRL_TEST_CRASH_RANKS", "").split(",") \
            and update >= 2:
        raise FloatingPointError("gradient worker crashed on purpose")
    yield from _original(self, rollouts, update, progress)


GradientWorker.gradients = gradients

if __name__ == "__main__":
    main()
