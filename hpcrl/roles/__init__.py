"""Training roles: collector, gradient worker, updater. Placements decide where they run."""
from hpcrl.roles.collector import Collector
from hpcrl.roles.gradient_worker import GradientWorker
from hpcrl.roles.messages import Gradient, Weights
from hpcrl.roles.updater import Updater

__all__ = ["Collector", "Gradient", "GradientWorker", "Updater", "Weights"]
