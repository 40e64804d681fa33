# SPDX-License-Identifier: Apache-2.0
"""Push-pull round trips measured from Python, to compare with the C `afmesh bench` in the same run.

Run one process per node, e.g.::

    afmesh run --workers 1 --servers 1 -- python3 -m afmesh.bench
    afmesh run --workers 1 --servers 1 -- afmesh bench --sizes 8 --poll adaptive

Each worker pushes to every server and pulls the same number of bytes back
from each; servers answer with the pushed tensor itself (a zero-copy view of
their receive memory), as the C benchmark's servers do. Worker 0 prints
p50/p99/mean of push_pull + wait in microseconds for each case.
"""

import argparse
import os
import statistics
import time

import afmesh

STOP_KEY = 1 << 40


def cases(args):
    """(name, push tensor, pull tensors factory): 8 B, and tokens x hidden bf16 (torch if it is installed)."""
    try:
        import torch

        big = lambda: torch.zeros(args.tokens, args.hidden, dtype=torch.bfloat16)  # noqa: E731
        lib = "torch"
    except ImportError:
        import numpy

        big = lambda: afmesh.as_tensor(numpy.zeros((args.tokens, args.hidden), numpy.uint16), "bfloat16")  # noqa: E731
        lib = "numpy"
    return [("8 B", lambda: bytearray(8)), (f"{args.tokens}x{args.hidden} bf16 ({lib})", big)]


def percentile(sorted_values, q):
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def run_worker(node, args):
    results = []
    for key, (name, make) in enumerate(cases(args)):
        push = make()
        pulls = [make() for _ in range(node.num_servers)]
        registrations = [node.register(b) for b in [push] + pulls]
        pull = [(100 + key, b, s) for s, b in enumerate(pulls)]
        samples = []
        for i in range(args.warmup + args.iters):
            start = time.perf_counter_ns()
            node.push_pull(push=[(key, push)], pull=pull).wait(timeout=60)
            if i >= args.warmup:
                samples.append((time.perf_counter_ns() - start) / 1000)
        for r in registrations:
            r.close()
        samples.sort()
        results.append((name, percentile(samples, 0.5), percentile(samples, 0.99), statistics.fmean(samples)))
    node.push_pull(push=[(STOP_KEY, bytearray(8))]).wait(timeout=60)
    if node.rank == 0:
        print(f"python push_pull+wait, {node.num_workers} worker(s) x {node.num_servers} server(s), "
              f"poll {args.poll}, {args.iters} iterations")
        print(f"{'case':<28}{'p50 us':>10}{'p99 us':>10}{'mean us':>10}")
        for name, p50, p99, mean in results:
            print(f"{name:<28}{p50:>10.1f}{p99:>10.1f}{mean:>10.1f}")


def run_server(node):
    """Echoes every push back until each worker has sent STOP_KEY."""
    stopped = 0
    while stopped < node.num_workers:
        for request in node.get_batch("any"):
            stopped += STOP_KEY in request.keys
            request.respond([request.tensors[0]] if request.pulls else [])


def main():
    parser = argparse.ArgumentParser(description="push_pull + wait round trips from Python")
    parser.add_argument("--iters", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--hidden", type=int, default=7168)
    parser.add_argument("--poll", choices=("busy", "adaptive", "blocking"), default="adaptive")
    args = parser.parse_args()
    worker = (os.environ.get("AFMESH_ROLE") or os.environ.get("DMLC_ROLE")) == "worker"
    with (afmesh.Worker if worker else afmesh.Server)() as node:
        node.set_poll_mode(args.poll)
        if worker:
            run_worker(node, args)
        else:
            run_server(node)


if __name__ == "__main__":
    main()
