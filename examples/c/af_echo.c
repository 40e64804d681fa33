/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The AF exchange from C, using only <afmesh/afmesh.h>. Run one process per
 * node; `afmesh run` starts them all with the right environment:
 *
 *   afmesh run --workers 2 --servers 2 -- af_echo_c
 *
 * Each worker keeps MICROBATCHES micro-batches in flight: it pushes a
 * [ROWS, COLS] float32 activation to every server and pulls one answer from
 * each. Each server answers y = 2x + (its rank + 1). Workers check every
 * element, so the exit status says whether the data arrived intact.
 */
#include <afmesh/afmesh.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ROWS = 16, COLS = 256, MICROBATCHES = 3, LAYERS = 8, MAX_SERVERS = 64 };
#define ELEMS ((size_t)ROWS * COLS)
#define TIMEOUT_MS 60000

/* Prints what failed with the library's reason, and exits. */
static void check(afmesh_status status, const char *what) {
    if (status == AFMESH_OK) return;
    fprintf(stderr, "%s: %s: %s\n", what, afmesh_strerror(status), afmesh_last_error());
    exit(1);
}

static afmesh_tensor matrix(float *data) {
    afmesh_tensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.bytes = ELEMS * sizeof(float);
    t.kind = AFMESH_MEM_HOST;
    t.dtype.code = 2; /* DLPack float */
    t.dtype.bits = 32;
    t.dtype.lanes = 1;
    t.ndim = 2;
    t.shape[0] = ROWS;
    t.shape[1] = COLS;
    return t;
}

static float pushed(int worker, int layer, int mb, size_t i) { return (float)(worker * 100 + layer * 10 + mb) + (float)i; }
static float answered(float x, int server) { return 2 * x + (float)(server + 1); }

static int run_worker(afmesh_node *node, int rank, int servers) {
    static float push[MICROBATCHES][ELEMS], pull[MICROBATCHES][MAX_SERVERS][ELEMS];
    afmesh_mr *mr;
    check(afmesh_register_buffer(node, push, sizeof push, AFMESH_MEM_HOST, 0, &mr), "register push buffers");
    check(afmesh_register_buffer(node, pull, sizeof pull, AFMESH_MEM_HOST, 0, &mr), "register pull buffers");
    for (int layer = 0; layer < LAYERS; ++layer) {
        afmesh_handle handles[MICROBATCHES];
        for (int mb = 0; mb < MICROBATCHES; ++mb) {
            for (size_t i = 0; i < ELEMS; ++i) push[mb][i] = pushed(rank, layer, mb, i);
            afmesh_push p = {.key = (uint64_t)mb, .tensor = matrix(push[mb])}; /* to every server */
            afmesh_pull q[MAX_SERVERS];
            for (int s = 0; s < servers; ++s)
                q[s] = (afmesh_pull){.key = 100 + (uint64_t)mb, .tensor = matrix(pull[mb][s]), .server = s};
            check(afmesh_push_pull(node, &p, 1, q, (size_t)servers, &handles[mb]), "push_pull");
        }
        for (int mb = 0; mb < MICROBATCHES; ++mb) {
            check(afmesh_wait(node, handles[mb], TIMEOUT_MS), "wait");
            for (int s = 0; s < servers; ++s)
                for (size_t i = 0; i < ELEMS; ++i)
                    if (pull[mb][s][i] != answered(pushed(rank, layer, mb, i), s)) {
                        fprintf(stderr, "worker %d: layer %d micro-batch %d server %d element %zu is wrong\n", rank,
                                layer, mb, s, i);
                        return 1;
                    }
        }
    }
    printf("worker %d: %d layers x %d micro-batches verified from %d servers\n", rank, LAYERS, MICROBATCHES, servers);
    return 0;
}

static int run_server(afmesh_node *node, int rank, int workers) {
    float *out = malloc(ELEMS * sizeof(float));
    afmesh_request **batch = malloc((size_t)workers * sizeof *batch);
    if (!out || !batch) return 1;
    for (int round = 0; round < LAYERS * MICROBATCHES; ++round) {
        size_t count = 0;
        check(afmesh_get_batch(node, AFMESH_BATCH_ALL_WORKERS, TIMEOUT_MS, batch, (size_t)workers, &count), "get_batch");
        for (size_t r = 0; r < count; ++r) {
            uint64_t key;
            afmesh_tensor in;
            check(afmesh_request_push(batch[r], 0, &key, &in), "request_push");
            const float *x = in.data;
            for (size_t i = 0; i < ELEMS; ++i) out[i] = answered(x[i], rank);
            afmesh_tensor answer = matrix(out);
            check(afmesh_respond(node, batch[r], &answer, 1), "respond"); /* returns once `out` may be reused */
        }
    }
    printf("server %d: answered %d rounds\n", rank, LAYERS * MICROBATCHES);
    free(batch);
    free(out);
    return 0;
}

int main(void) {
    afmesh_config config = {sizeof config, AFMESH_ROLE_FROM_CONFIG, NULL, NULL};
    afmesh_node *node;
    check(afmesh_node_create(&config, &node), "join the cluster");
    afmesh_role role;
    int32_t rank, workers, servers;
    check(afmesh_node_info(node, &role, &rank, &workers, &servers), "node info");
    if (servers > MAX_SERVERS) {
        fprintf(stderr, "this example handles at most %d servers\n", MAX_SERVERS);
        return 1;
    }
    int failed = role == AFMESH_ROLE_WORKER ? run_worker(node, rank, servers) : run_server(node, rank, workers);
    check(afmesh_node_destroy(node), "leave the cluster");
    return failed;
}
