# SPDX-License-Identifier: Apache-2.0
"""examples/kubernetes/leaderworkerset.yaml: the fields afmesh reads are there, and what the
library makes of each pod's LeaderWorkerSet variables is the cluster the manifest describes."""

import json
import os
import re
import subprocess

import pytest
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MANIFEST = os.path.join(ROOT, "examples", "kubernetes", "leaderworkerset.yaml")
BUILD_DIR = os.environ.get("AF_TEST_BUILD_DIR")


def load():
    with open(MANIFEST) as f:
        return yaml.safe_load(f)


def containers(manifest):
    """{'leader': container, 'worker': container} of the one group template."""
    lwt = manifest["spec"]["leaderWorkerTemplate"]
    return {role: lwt[f"{role}Template"]["spec"]["containers"][0] for role in ("leader", "worker")}


def env_of(container):
    return {e["name"]: e.get("value") for e in container.get("env", [])}


def scheduler_port():
    """The port afmesh's scheduler takes under LeaderWorkerSet, from the source that sets it."""
    with open(os.path.join(ROOT, "core", "job_env.h")) as f:
        return int(re.search(r"kJobSchedulerPort = (\d+);", f.read()).group(1))


def test_every_pod_runs_the_same_program_with_the_same_layout_and_nothing_afmesh_derives():
    manifest = load()
    assert manifest["apiVersion"] == "leaderworkerset.x-k8s.io/v1" and manifest["kind"] == "LeaderWorkerSet"
    pods = containers(manifest)
    assert pods["leader"]["command"] == pods["worker"]["command"]
    layouts = {role: env_of(c).get("AFMESH_LAYOUT") for role, c in pods.items()}
    assert layouts["leader"] == layouts["worker"] and layouts["leader"], layouts
    for role, c in pods.items():
        derived = {"AFMESH_ROLE", "AFMESH_RANK", "AFMESH_SCHEDULER", "AFMESH_NUM_WORKERS", "AFMESH_NUM_SERVERS"}
        assert not derived & env_of(c).keys(), f"the {role} sets what afmesh derives from LeaderWorkerSet"


def test_the_leader_exposes_the_port_its_scheduler_listens_on():
    ports = [p["containerPort"] for p in containers(load())["leader"].get("ports", [])]
    assert scheduler_port() in ports, ports


@pytest.mark.skipif(not BUILD_DIR, reason="needs AF_TEST_BUILD_DIR (run through ctest)")
def test_each_pod_takes_the_place_the_layout_gives_it():
    manifest = load()
    size = manifest["spec"]["leaderWorkerTemplate"]["size"]
    layout = env_of(containers(manifest)["leader"])["AFMESH_LAYOUT"]
    servers = int(layout.split(":")[1])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AFMESH_", "LWS_"))}
    for index in range(size):
        env.update(LWS_LEADER_ADDRESS="10.0.0.7", LWS_WORKER_INDEX=str(index), LWS_GROUP_SIZE=str(size),
                   AFMESH_LAYOUT=layout)
        info = json.loads(subprocess.run([os.path.join(BUILD_DIR, "bin", "afmesh"), "info", "--json"], env=env, capture_output=True, text=True,
                                         check=True).stdout)
        place = info["job"]
        assert place["launcher"] == "LeaderWorkerSet", place
        role = place["role"]
        expected = ("server", index) if index < servers else ("worker", index - servers)
        assert (role["role"], role["rank"]) == expected, role
        assert (role["num_workers"], role["num_servers"]) == (size - servers, servers), role
        assert role["scheduler"] == f"10.0.0.7:{scheduler_port()}", role
        assert role["runs_scheduler"] == (index == 0), role
