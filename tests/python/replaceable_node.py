# SPDX-License-Identifier: Apache-2.0
"""A node of test_replacement.py's clusters, in a process of its own so the test can SIGKILL it.

    replaceable_node.py server ADDRESS RANK WORKERS SERVERS
        answers every request with its push plus 1000 x (its rank + 1); exits
        once every worker has stopped
    replaceable_node.py worker ADDRESS RANK WORKERS SERVERS ROUNDS [--linger]
        ROUNDS push-pulls of [rank, round] to server 0, each answer checked,
        then stops (with --linger, once its stdin is closed: the stop waits
        for every node, and a node that has stopped keeps out replacements);
        with ROUNDS < 0, -ROUNDS of them and then it waits to be killed

Prints one line per step, exits 0 once every check held.
"""

import sys
import time

import numpy as np

import afmesh

role, address, rank, workers, servers = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
settings = {"AFMESH_NUM_WORKERS": workers, "AFMESH_NUM_SERVERS": servers, "AFMESH_RANK": rank}

if role == "server":
    server = afmesh.Server(address, settings)
    print("serving, replacement:", server.replacement, flush=True)
    try:
        while True:
            for request in server.get_batch("any", timeout=None):
                request.respond([request.tensors[0].numpy() + 1000 * (rank + 1)])
    except afmesh.Closed:
        pass
    server.close()
else:
    rounds = int(sys.argv[6])
    worker = afmesh.Worker(address, settings)
    for i in range(abs(rounds)):
        push = np.array([rank, i], np.float32)
        out = np.zeros(2, np.float32)
        (answer,) = worker.push_pull(push=[afmesh.Push(0, push, servers=[0])],
                                     pull=[afmesh.Pull(1, out, server=0)]).wait(timeout=120)
        assert (answer == push + 1000).all(), answer
        print("round", i, "answered", flush=True)
    if rounds < 0:
        time.sleep(3600)  # the test kills this incarnation
    if "--linger" in sys.argv:
        sys.stdin.read()
    worker.close()
print("done", flush=True)
