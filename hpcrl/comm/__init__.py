"""Communication layer: the only hpcrl package that touches mpi4py or torch.distributed.

Every function takes the communicator (or process group) it works on; only
``world_comm()`` reaches for MPI.COMM_WORLD. mpi4py is imported lazily, on
first use, so importing this package does not initialise MPI.
"""

from hpcrl.comm._mpi import MpiUnavailableError
from hpcrl.comm.abort import (
    abort_job,
    abort_on_error,
    install_abort_handler,
    report_and_abort,
    set_expendable,
)
from hpcrl.comm.allreduce import (
    KINDS,
    Allreducer,
    LocalAllreducer,
    MpiAllreducer,
    TorchDistAllreducer,
    make_allreducer,
    measure_cpu_allreducers,
    sum_host_array_,
    time_allreduce,
)
from hpcrl.comm.buffers import (
    DEFAULT_POLL,
    Envelope,
    Poll,
    irecv,
    isend,
    poll_until,
    probe_any,
    wait,
    wait_any,
    wait_probe,
)
from hpcrl.comm.channel import Channel, LocalChannel, MpiChannel, channel_for
from hpcrl.comm.rendezvous import destroy_gradient_group, init_gradient_group
from hpcrl.comm.world import (
    SelfComm,
    WorldInfo,
    finalize_mpi,
    finish_world,
    split_by_role,
    world_comm,
)

__all__ = [
    "DEFAULT_POLL",
    "KINDS",
    "Allreducer",
    "Channel",
    "Envelope",
    "LocalAllreducer",
    "LocalChannel",
    "MpiChannel",
    "MpiAllreducer",
    "MpiUnavailableError",
    "Poll",
    "SelfComm",
    "TorchDistAllreducer",
    "WorldInfo",
    "abort_job",
    "abort_on_error",
    "channel_for",
    "destroy_gradient_group",
    "init_gradient_group",
    "install_abort_handler",
    "irecv",
    "isend",
    "make_allreducer",
    "measure_cpu_allreducers",
    "poll_until",
    "probe_any",
    "report_and_abort",
    "set_expendable",
    "split_by_role",
    "sum_host_array_",
    "time_allreduce",
    "wait",
    "wait_any",
    "wait_probe",
    "world_comm",
    "finish_world",
    "finalize_mpi",
]
