# SPDX-License-Identifier: Apache-2.0
"""An Attention-FFN disaggregated forward pass, the way an inference engine runs it.

Workers hold the attention layers and their micro-batches of tokens; servers
hold the FFN layers, each server one slice of every FFN (tensor-parallel
over the intermediate dimension). Per layer and micro-batch, a worker pushes
the attention output to every server, each server answers its partial FFN
output, and the worker adds them up: the residual stream goes on to the next
layer. Three micro-batches are in flight, so one's attention overlaps the
others' FFN. At the end each worker runs the same model in a single process
and checks the results agree.

    afmesh run --workers 2 --servers 2 -- python3 examples/python/af_pipeline.py

Computations use torch when it is installed, numpy otherwise (--backend).
"""

import argparse
import os
import sys

import numpy as np

import afmesh

MICROBATCHES = 3
PUSH_KEY, LAYER_KEY, PULL_KEY = 0, 10, 20  # + micro-batch index


class Backend:
    """The few array operations the model needs, in numpy or torch."""

    def __init__(self, name):
        self.torch = None
        if name in ("auto", "torch"):
            try:
                import torch

                self.torch = torch
            except ImportError:
                if name == "torch":
                    raise
        self.name = "torch" if self.torch else "numpy"

    def array(self, a):
        return self.torch.from_numpy(np.ascontiguousarray(a)) if self.torch else np.ascontiguousarray(a)

    def view(self, tensor):
        """An afmesh.Tensor received by a server as this backend's array (no copy)."""
        return tensor.torch() if self.torch else tensor.numpy()

    def empty(self, *shape):
        return self.torch.empty(*shape) if self.torch else np.empty(shape, np.float32)

    def concat(self, parts):
        return self.torch.cat(parts) if self.torch else np.concatenate(parts)

    def relu(self, x):
        return self.torch.relu(x) if self.torch else np.maximum(x, 0)

    def softmax(self, x):
        if self.torch:
            return self.torch.softmax(x, dim=-1)
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    def numpy(self, x):
        return x.numpy() if self.torch else x


class Model:
    """Weights every process derives from the same seeds: attention per layer, FFN per layer."""

    def __init__(self, xp, layers, hidden, intermediate):
        self.xp, self.layers, self.hidden, self.intermediate = xp, layers, hidden, intermediate
        rng = np.random.default_rng(1234)
        normal = lambda fan_in, *shape: (rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32)  # noqa: E731
        self.attn = [[xp.array(normal(hidden, hidden, hidden)) for _ in range(3)] for _ in range(layers)]
        self.w1 = [normal(hidden, hidden, intermediate) for _ in range(layers)]
        self.w2 = [normal(intermediate, intermediate, hidden) for _ in range(layers)]

    def attention(self, h, layer):
        """Single-head self-attention with a residual connection."""
        wq, wk, wv = self.attn[layer]
        q, k, v = h @ wq, h @ wk, h @ wv
        return h + self.xp.softmax(q @ k.T / float(np.sqrt(self.hidden))) @ v

    def ffn_slice(self, layer, server, servers):
        """Server `server`'s share of layer `layer`'s FFN: columns of W1 and the matching rows of W2."""
        cut = np.array_split(np.arange(self.intermediate), servers)[server]
        w1, w2 = self.xp.array(self.w1[layer][:, cut]), self.xp.array(self.w2[layer][cut, :])
        return lambda x: self.xp.relu(x @ w1) @ w2

    def reference(self, h):
        """The whole model in this process: what the disaggregated run must reproduce."""
        for layer in range(self.layers):
            x = self.attention(h, layer)
            h = x + self.ffn_slice(layer, 0, 1)(x)
        return h


def tokens(mb):
    """Micro-batches differ in length, as real ones do: responses are shorter than the largest buffer."""
    return 8 + 4 * mb


def initial_tokens(xp, worker, mb, hidden):
    rng = np.random.default_rng(1000 * worker + mb)
    return xp.array(rng.standard_normal((tokens(mb), hidden)).astype(np.float32))


def run_worker(node, model, xp, hidden):
    servers, most = node.num_servers, tokens(MICROBATCHES - 1)
    push = [xp.empty(most, hidden) for _ in range(MICROBATCHES)]
    pull = [[xp.empty(most, hidden) for _ in range(servers)] for _ in range(MICROBATCHES)]
    layer_of = [np.zeros(1, np.int32) for _ in range(MICROBATCHES)]
    registrations = [node.register(b) for b in push + [b for per_mb in pull for b in per_mb]]
    node.barrier()  # the servers' receive buffers are registered
    h = [initial_tokens(xp, node.rank, mb, hidden) for mb in range(MICROBATCHES)]
    x, handles = [None] * MICROBATCHES, [None] * MICROBATCHES

    def finish(mb):
        partials = handles[mb].wait(timeout=60)  # views of pull[mb][s], cut to the tokens sent
        h[mb] = x[mb] + sum(partials[1:], partials[0])

    for layer in range(model.layers):
        for mb in range(MICROBATCHES):
            if handles[mb]:
                finish(mb)
            x[mb] = model.attention(h[mb], layer)
            n = tokens(mb)
            push[mb][:n] = x[mb]
            layer_of[mb][0] = layer
            handles[mb] = node.push_pull(
                push=[(PUSH_KEY + mb, push[mb][:n]), (LAYER_KEY + mb, layer_of[mb])],
                pull=[(PULL_KEY + mb, pull[mb][s], s) for s in range(servers)])
    for mb in range(MICROBATCHES):
        finish(mb)
    for r in registrations:
        r.close()

    worst = 0.0
    for mb in range(MICROBATCHES):
        got, want = xp.numpy(h[mb]), xp.numpy(model.reference(initial_tokens(xp, node.rank, mb, hidden)))
        if not np.allclose(got, want, rtol=1e-3, atol=1e-3):
            print(f"worker {node.rank}: micro-batch {mb} differs from the single-process model by up to "
                  f"{np.abs(got - want).max()}", file=sys.stderr)
            return 1
        worst = max(worst, float(np.abs(got - want).max()))
    print(f"worker {node.rank}: {model.layers} layers x {MICROBATCHES} micro-batches over {servers} servers "
          f"match the single-process model ({xp.name}, largest difference {worst:.2e})")
    return 0


def run_server(node, model, xp, hidden):
    workers, most = node.num_workers, tokens(MICROBATCHES - 1)
    # One receive slice per (worker, micro-batch) for the activations; the
    # small layer-index tensors take the library's on-demand path.
    recv = xp.empty(workers * MICROBATCHES * most, hidden)
    node.register_recv_buffer(recv, [w for w in range(workers) for _ in range(MICROBATCHES)],
                              [PUSH_KEY + mb for _ in range(workers) for mb in range(MICROBATCHES)])
    node.barrier()
    ffns = [model.ffn_slice(layer, node.rank, node.num_servers) for layer in range(model.layers)]
    for _ in range(model.layers * MICROBATCHES):
        batch = node.get_batch()  # one request from every worker: the same layer and micro-batch
        layer = int(batch[0].tensors[1].numpy()[0])
        inputs = [xp.view(r.tensors[0]) for r in batch]
        out = ffns[layer](xp.concat(inputs))  # the FFN runs once over every worker's tokens
        node.respond_vec(out, [len(x) for x in inputs], batch)
    print(f"server {node.rank}: {model.layers * MICROBATCHES} batches from {workers} workers")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--intermediate", type=int, default=256)
    parser.add_argument("--backend", choices=("auto", "numpy", "torch"), default="auto")
    args = parser.parse_args()
    xp = Backend(args.backend)
    model = Model(xp, args.layers, args.hidden, args.intermediate)
    worker = (os.environ.get("AFMESH_ROLE") or os.environ.get("DMLC_ROLE")) == "worker"
    with (afmesh.Worker if worker else afmesh.Server)() as node:
        return (run_worker if worker else run_server)(node, model, xp, args.hidden)


if __name__ == "__main__":
    sys.exit(main())
