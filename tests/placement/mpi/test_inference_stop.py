"""An inference rank serves the requests a collector made with weights it never got itself.

Newest-weights delivery may skip a version for a busy subscriber: the inference rank can be
handed version 1 and then the STOP message (which carries the newest weights) while its
collector was handed the version in between and asks to act with it. The inference rank
must serve that request with the weights STOP brought, or the collector waits for its reply
forever and the inference rank for the collector's goodbye (a job that trained its whole
budget and never ended: seen on a loaded two-node Slurm run of IMPALA with an inference rank).
"""
from __future__ import annotations

import numpy as np
import pytest
from mpirun import FAST

from hpcrl.comm import world_comm
from hpcrl.config import from_dict
from hpcrl.exchange.latest_weights import send_weights
from hpcrl.exchange.messages import STOP, Weights
from hpcrl.exchange.remote_acting import RemoteEngine, RemoteLinks, acting_spec, client_ends
from hpcrl.placement.job import build_job
from hpcrl.placement.ranks.inference_rank import InferenceRank

TAG_ASKED = 98  # the collector's request is on its way: only then does STOP go out


@pytest.mark.parallel(3)
@pytest.mark.timeout(60)
def test_a_request_for_a_skipped_version_is_served_with_the_weights_stop_brought() -> None:
    config = from_dict({}, [*FAST, "scheme.preset=impala", "scheme.gradient_workers=1",
                            "scheme.collectors_per_worker=1", "scheme.inference_ranks=1",
                            "scheme.transport=messages", "env.num_envs=2"])
    job = build_job(config)
    world = world_comm()
    assert [r.role for r in job.table] == ["gradient_worker", "inference", "collector"]
    if job.rank == 0:  # the gradient worker: version 1, then (version 2 skipped) STOP at 3
        actor = job.new_actor()
        message = Weights.empty_like(actor)
        for request in send_weights(job.channel, message.capture(actor, 1), 1):
            job.channel.wait(request)
        world.recv(source=2, tag=TAG_ASKED)
        for request in send_weights(job.channel, message.capture(actor, 3, STOP), 1):
            job.channel.wait(request)
    elif job.rank == 1:
        serving = InferenceRank(job)
        serving.run()  # returns only once the collector said goodbye
        assert serving.stopped and serving.version == 3 and serving.batches == 1
    else:  # the collector was told to collect with version 2
        actor = job.new_actor()
        assert job.env_groups == 2  # an inference rank acts: two groups of one env each
        ends = client_ends(job.channel, 1, acting_spec(job, actor), 1, 2)
        link = RemoteLinks(ends, lambda: 2)
        world.send(None, dest=0, tag=TAG_ASKED)
        obs = np.zeros((1, *job.spaces.obs_shape), np.float32)
        noise = np.zeros((1, *actor.distribution.noise_shape()), np.float32)
        actions, _, values, _ = RemoteEngine(link).step(obs, noise)
        assert ends[0].reply.version == 3 and actions.shape == (1,)
        assert np.isfinite(values).all()
        link.close()
    world.Barrier()
