"""The elicitation callback in a real two-process torch.distributed run (gloo, on the CPU):
each rank grades half of a prompt's group, and the callback gathers both halves, elicits once
on the main process from all of them, and every rank then reads the same new rubric version."""

import os
import socket
from types import SimpleNamespace

import pytest

from rewardlab.rubrics.store import RubricStore
from rewardlab.testing import ScriptedServer
from tests.conftest import openai_backend
from tests.rubrics.test_elicit_scripted import server_logic

pytest.importorskip("transformers")

HALVES = [["It is 42."], ["It is 42 metres."]]
REFERENCE = "It is 42 metres, at noon."


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def rank_main(rank, url, store_path, port, results):
    import torch.distributed as dist

    from rewardlab import Sample, build
    from rewardlab.integrations.trl_callbacks import RubricElicitationCallback
    from rewardlab.rubrics.elicit_options import ElicitationOptions

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        reward = build(
            {"type": "rubric", "store": store_path, "backend": openai_backend(url), "client": {"cache": None}}
        )
        callback = RubricElicitationCallback(reward, options=ElicitationOptions(pairs_per_prompt=2))
        samples = [
            Sample(
                prompt="How far?", completion=c, fields={"prompt_id": "p1", "reference_response": REFERENCE}
            )
            for c in HALVES[rank]
        ]
        reward.score(samples)
        callback.on_step_end(None, SimpleNamespace(global_step=1, is_world_process_zero=rank == 0), None)
        after = reward.score(samples)[0].details["rubric_version"]
        results.put((rank, len(callback.reports), after))
    finally:
        dist.destroy_process_group()


def test_ranks_gather_then_the_main_process_elicits_once(tmp_path):
    import multiprocessing

    from rewardlab.rubrics.model import Criterion, Rubric

    store = RubricStore(tmp_path / "rubrics.sqlite")
    store.put("p1", Rubric((Criterion("Says the answer is 42", 1.0),)), step=0)
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    with ScriptedServer(server_logic) as server:
        port = free_port()
        ranks = [
            context.Process(target=rank_main, args=(rank, server.url, store.path, port, results))
            for rank in (0, 1)
        ]
        for process in ranks:
            process.start()
        for process in ranks:
            process.join(timeout=120)
        assert [process.exitcode for process in ranks] == [0, 0]
        elicitations = [b for b in server.requests if "propose criteria" in b["messages"][-1]["content"]]
    outcome = sorted(results.get(timeout=5) for _ in ranks)
    # Only the main process elicited: one comparison per policy response, from both ranks' halves.
    assert [(rank, reports) for rank, reports, _ in outcome] == [(0, 1), (1, 0)]
    assert len(elicitations) == 2
    added = [r.detail["criterion"]["text"] for r in store.history("p1") if r.action == "add"]
    assert added == ["Mentions units like metres", "States when the measurement was taken"]
    # Both ranks read the version the main process wrote.
    assert [version for _, _, version in outcome] == [2, 2]
