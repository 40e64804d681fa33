# SPDX-License-Identifier: Apache-2.0
"""afmesh.fserver: StepMesh's fserver_lib API, driven as StepMesh programs drive it.

Each cluster test starts a scheduler, servers and workers as separate
processes configured only by DMLC_* variables (see fserver_node.py).
"""

import importlib.util
import os
import signal
import sys

import pytest

import afmesh
import afmesh.fserver as fserver
from conftest import HERE, free_address, node_env

HAS_TORCH = importlib.util.find_spec("torch") is not None


def test_stepmesh_test_fserver_scenario(run_fserver):
    out = run_fserver("stepmesh")
    assert "sums correct" in out["worker 0"]


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed (python3-torch)")
def test_stepmesh_test_fserver_scenario_with_torch_tensors(run_fserver):
    out = run_fserver("stepmesh", 1, 1, "--torch")
    assert "sums correct" in out["worker 0"]


def test_respond_vec_gives_each_worker_its_own_rows(run_fserver):
    """StepMesh slices every request from row 0; afmesh gives request i the i-th group of rows."""
    out = run_fserver("respond_vec", 3, 1)
    assert all("own rows" in out[f"worker {w}"] for w in range(3))


def test_registered_buffers_barriers_traces_and_misuse_with_two_servers(run_fserver):
    out = run_fserver("full", 2, 2)
    assert all("traces in order" in out[f"worker {w}"] for w in range(2))


def test_stepmesh_trip_ups_work_or_are_refused_saying_what_to_do(run_fserver):
    """One pull tensor for two servers, a response in another dtype of the same size, get_rank, argument error
    classes and a second wait: each checked inside the processes (fserver_node.py tripups)."""
    out = run_fserver("tripups", 1, 2)
    assert "each server's pull tensor filled, server 1's from float16 bytes" in out["worker 0"]
    assert "server 1: answered in float16" in out["server 1"]


def test_a_server_that_stops_is_a_membership_event_for_the_worker(run_fserver):
    out = run_fserver("events")
    assert "worker: server 0 stopped:" in out["worker 0"]


def test_a_worker_loop_survives_its_server_being_replaced(processes, tmp_path):
    """The server SIGKILLs itself after three batches; started again under its rank, it is admitted as a
    replacement, and the worker's fserver loop retries what failed once it hears PEER_UP."""
    address = free_address()
    script = os.path.join(HERE, "fserver_node.py")
    argv = [sys.executable, script, "replacement"]
    marker = {"REPLACEMENT_MARKER": str(tmp_path / "died")}
    processes.start("scheduler", argv, node_env("scheduler", 1, 1, address))
    processes.start("server 0", argv, node_env("server", 1, 1, address, 0, **marker))
    processes.start("worker 0", argv, node_env("worker", 1, 1, address, 0))
    assert processes.wait("server 0") == -signal.SIGKILL
    processes.start("server 0 again", argv, node_env("server", 1, 1, address, 0, **marker))
    results = processes.wait_all()
    outputs = "\n".join(f"---- {n} exited {code}\n{out}" for n, (code, out) in results.items())
    assert {n: code for n, (code, _) in results.items()} == {
        "scheduler": 0, "server 0": -signal.SIGKILL, "server 0 again": 0, "worker 0": 0}, outputs
    assert "server: replacement True" in results["server 0 again"][1], outputs
    assert "retried after the replacement" in results["worker 0"][1], outputs


def test_stepmesh_variables_are_reported_in_one_warning_line(run_fserver):
    out = run_fserver("stepmesh")
    aliases = ["DMLC_ROLE as AFMESH_ROLE", "DMLC_NUM_WORKER as AFMESH_NUM_WORKERS",
               "DMLC_NUM_SERVER as AFMESH_NUM_SERVERS", "STEPMESH_GPU as AFMESH_DEVICE_ID",
               "DMLC_PS_ROOT_URI and DMLC_PS_ROOT_PORT as AFMESH_SCHEDULER"]
    for name, output in out.items():
        lines = [line for line in output.splitlines() if " as AFMESH_" in line]
        assert len(lines) == 1, f"{name}:\n{output}"
        ranked = aliases + ([] if name == "scheduler" else ["DMLC_NODE_RANK as AFMESH_RANK"])
        assert all(a in lines[0] for a in ranked) and "warn" in lines[0], lines[0]


def test_calls_before_init_say_so():
    for call in (lambda: fserver.push_pull([], [], [], []), fserver.get_batch, lambda: fserver.fetch_trace(1),
                 lambda: fserver.barrier(True, True), lambda: fserver.register_recv_buffer(bytearray(8), [0], [0]),
                 fserver.get_rank):
        with pytest.raises(afmesh.Closed, match="init"):
            call()
    fserver.stop()  # stopping what never started is harmless


@pytest.mark.parametrize("role, reason", [("joint", "joint role is not supported"), ("", "must be worker")])
def test_init_refuses_roles_it_cannot_play(monkeypatch, role, reason):
    monkeypatch.delenv("AFMESH_ROLE", raising=False)
    monkeypatch.setenv("DMLC_ROLE", role)
    with pytest.raises(afmesh.InvalidArgument, match=reason):
        fserver.init()


def test_get_nanosecond_is_the_trace_clock():
    import time

    before = time.monotonic_ns()
    now = fserver.get_nanosecond()
    assert before <= now <= time.monotonic_ns()


def test_unknown_handles_are_not_found():
    with pytest.raises(afmesh.NotFound):
        fserver.get_all_handlers(424242)
