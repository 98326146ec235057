"""What a run needs around training: its directory and files, progress logs, checkpoints,
devices and CPU settings, stop signals, finite checks, RNG states and W&B logging."""
