# SPDX-License-Identifier: Apache-2.0
"""A server of test_replacement.py's cluster, in a process of its own so the test can SIGKILL it.

    replaceable_server.py ADDRESS RANK WORKERS SERVERS

Answers every request with its push plus 1000 x (its rank + 1), and prints
"serving" once it has joined. Exits 0 once every worker has stopped.
"""

import sys

import afmesh

address, rank, workers, servers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
server = afmesh.Server(address, {"AFMESH_NUM_WORKERS": workers, "AFMESH_NUM_SERVERS": servers, "AFMESH_RANK": rank})
print("serving", flush=True)
try:
    while True:
        for request in server.get_batch("any", timeout=None):
            request.respond([request.tensors[0].numpy() + 1000 * (rank + 1)])
except afmesh.Closed:
    pass
server.close()
