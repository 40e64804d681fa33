// One node of a test cluster, driven by the AFMESH_* environment the test
// harness (or `afmesh run`) sets. It uses only the public API and checks
// every byte it pulls. Exit code 0 means the scenario held; anything else is
// printed with the reason.
//
//   af_test_node echo [--iters N] [--microbatches M] [--rows R] [--cols C]
//                     [--subset] [--dynamic] [--respond-vec] [--unregistered]
//                     [--die-after K]     (this node SIGKILLs itself after K rounds)
//                     [--expect-peer-failure]  (succeed only once a peer's death is reported)
//   af_test_node join --expect STATUS   (only joins; STATUS e.g. AFMESH_ERR_TIMEOUT)
#include <afmesh/afmesh.hpp>

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using afmesh::api::Error;
using afmesh::api::Node;
using afmesh::api::check;

struct Options {
    std::string scenario;
    int iters = 20, microbatches = 3, rows = 8, cols = 64;
    bool subset = false, dynamic = false, respond_vec = false, unregistered = false;
    int die_after = -1;
    bool expect_peer_failure = false;
    std::string expect;
};

[[noreturn]] void fail(const std::string &why) {
    fprintf(stderr, "FAIL: %s\n", why.c_str());
    fflush(stderr);
    _exit(1);  // at once: the point is to report, not to stop cleanly
}

Options parse(int argc, char **argv) {
    Options o;
    if (argc < 2) fail("usage: af_test_node echo|join [options]");
    o.scenario = argv[1];
    for (int i = 2; i < argc; ++i) {
        std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) fail(a + " needs a value");
            return argv[++i];
        };
        if (a == "--iters") o.iters = std::stoi(value());
        else if (a == "--microbatches") o.microbatches = std::stoi(value());
        else if (a == "--rows") o.rows = std::stoi(value());
        else if (a == "--cols") o.cols = std::stoi(value());
        else if (a == "--subset") o.subset = true;
        else if (a == "--dynamic") o.dynamic = true;
        else if (a == "--respond-vec") o.respond_vec = true;
        else if (a == "--unregistered") o.unregistered = true;
        else if (a == "--die-after") o.die_after = std::stoi(value());
        else if (a == "--expect-peer-failure") o.expect_peer_failure = true;
        else if (a == "--expect") o.expect = value();
        else fail("unknown option " + a);
    }
    return o;
}

afmesh_role role_from_env() {
    const char *r = getenv("AFMESH_ROLE");
    if (!r) fail("AFMESH_ROLE is not set");
    if (!strcmp(r, "worker")) return AFMESH_ROLE_WORKER;
    if (!strcmp(r, "server")) return AFMESH_ROLE_SERVER;
    return AFMESH_ROLE_SCHEDULER;
}

afmesh_tensor matrix(float *data, int rows, int cols) {
    afmesh_tensor t{};
    t.data = data;
    t.bytes = static_cast<uint64_t>(rows) * cols * sizeof(float);
    t.dtype = {2, 32, 1};
    t.ndim = 2;
    t.shape[0] = rows;
    t.shape[1] = cols;
    return t;
}

// The value a worker pushes at (iteration, micro-batch, element); the server
// answers 2x + its rank + 1, so each answer proves who computed it from what.
float pushed_value(int worker, int iter, int mb, int i) { return static_cast<float>(worker * 1000 + iter * 10 + mb) + i * 0.5f; }
float answered_value(float x, int server) { return 2 * x + static_cast<float>(server + 1); }
// Dynamic token counts: the number of rows a server answers with.
int answered_rows(const Options &o, int iter, int server) { return o.dynamic ? 1 + (iter + server) % o.rows : o.rows; }
// Subset mode: the one server a micro-batch goes to.
int target_server(int iter, int mb, int num_servers) { return (iter + mb) % num_servers; }

bool maybe_die(const Options &o, int round) {
    if (o.die_after >= 0 && round >= o.die_after) {
        printf("dying on purpose after %d rounds\n", round);
        fflush(stdout);
        kill(getpid(), SIGKILL);
    }
    return false;
}

int run_worker(Node &node, const Options &o) {
    const int rank = node.rank(), servers = node.num_servers();
    const size_t elems = static_cast<size_t>(o.rows) * o.cols;
    std::vector<std::vector<float>> push(o.microbatches, std::vector<float>(elems));
    std::vector<std::vector<float>> pull(static_cast<size_t>(o.microbatches) * servers, std::vector<float>(elems));
    std::vector<afmesh::api::Registration> regs;
    regs.reserve(push.size() + pull.size());
    if (!o.unregistered) {
        for (auto &b : push) regs.emplace_back(node, b.data(), b.size() * sizeof(float));
        for (auto &b : pull) regs.emplace_back(node, b.data(), b.size() * sizeof(float));
    }
    // Servers register their receive slices before this barrier.
    check(afmesh_barrier(node.get(), 3, 30000));
    for (int iter = 0; iter < o.iters; ++iter) {
        maybe_die(o, iter);
        std::vector<afmesh_handle> handles;
        std::vector<std::vector<int32_t>> targets(o.microbatches);
        for (int mb = 0; mb < o.microbatches; ++mb) {
            for (size_t i = 0; i < elems; ++i) push[mb][i] = pushed_value(rank, iter, mb, static_cast<int>(i));
            afmesh_push p{};
            p.key = static_cast<uint64_t>(mb);
            p.tensor = matrix(push[mb].data(), o.rows, o.cols);
            if (o.subset) {
                targets[mb] = {target_server(iter, mb, servers)};
                p.servers = targets[mb].data();
                p.num_servers = 1;
            }
            std::vector<afmesh_pull> pulls;
            for (int s = 0; s < servers; ++s) {
                if (o.subset && s != targets[mb][0]) continue;
                afmesh_pull q{};
                q.key = 1000 + static_cast<uint64_t>(mb);
                q.tensor = matrix(pull[mb * servers + s].data(), o.rows, o.cols);
                q.server = s;
                pulls.push_back(q);
            }
            handles.push_back(node.push_pull({p}, pulls));
        }
        for (int mb = 0; mb < o.microbatches; ++mb) {
            node.wait(handles[mb], 30000);
            size_t pull_index = 0;
            for (int s = 0; s < servers; ++s) {
                if (o.subset && s != targets[mb][0]) continue;
                const int rows = answered_rows(o, iter, s);
                uint64_t bytes = 0;
                check(afmesh_pull_bytes(node.get(), handles[mb], pull_index++, &bytes));
                if (bytes != static_cast<uint64_t>(rows) * o.cols * sizeof(float))
                    fail("server " + std::to_string(s) + " answered " + std::to_string(bytes) + " bytes, want " +
                         std::to_string(rows * o.cols * sizeof(float)));
                const float *got = pull[mb * servers + s].data();
                for (size_t i = 0; i < static_cast<size_t>(rows) * o.cols; ++i) {
                    float want = answered_value(pushed_value(rank, iter, mb, static_cast<int>(i)), s);
                    if (got[i] != want)
                        fail("iter " + std::to_string(iter) + " mb " + std::to_string(mb) + " server " +
                             std::to_string(s) + " element " + std::to_string(i) + ": got " + std::to_string(got[i]) +
                             ", want " + std::to_string(want));
                }
            }
        }
    }
    if (o.expect_peer_failure) fail("no peer failure was reported");
    printf("worker %d: %d iterations x %d micro-batches verified\n", rank, o.iters, o.microbatches);
    return 0;
}

int run_server(Node &node, const Options &o) {
    const int rank = node.rank(), workers = node.num_workers();
    const size_t elems = static_cast<size_t>(o.rows) * o.cols;
    std::vector<float> recv;
    if (!o.unregistered) {
        // One slice per (worker, micro-batch key).
        recv.resize(elems * workers * o.microbatches);
        std::vector<int32_t> ranks;
        std::vector<uint64_t> keys;
        for (int w = 0; w < workers; ++w)
            for (int mb = 0; mb < o.microbatches; ++mb) ranks.push_back(w), keys.push_back(static_cast<uint64_t>(mb));
        check(afmesh_register_recv_buffer(node.get(), recv.data(), recv.size() * sizeof(float), AFMESH_MEM_HOST, 0,
                                          ranks.data(), keys.data(), ranks.size()));
    }
    check(afmesh_barrier(node.get(), 3, 30000));  // slices exist before any worker pushes
    std::vector<float> out(elems * workers);
    afmesh::api::Registration out_reg(node, out.data(), out.size() * sizeof(float));
    // Every worker sends one request per micro-batch per iteration (to this
    // server, unless subset mode routes it elsewhere).
    int expected = 0;
    for (int iter = 0; iter < o.iters; ++iter)
        for (int mb = 0; mb < o.microbatches; ++mb)
            expected += !o.subset || target_server(iter, mb, node.num_servers()) == rank ? workers : 0;
    int answered = 0, round = 0;
    while (answered < expected) {
        maybe_die(o, round++);
        std::vector<afmesh_request *> batch(workers * o.microbatches);
        size_t count = 0;
        check(afmesh_get_batch(node.get(), o.subset ? AFMESH_BATCH_ANY : AFMESH_BATCH_ALL_WORKERS, 30000, batch.data(),
                               batch.size(), &count));
        std::vector<int64_t> counts;
        for (size_t r = 0; r < count; ++r) {
            int32_t worker = -1;
            size_t num_push = 0, num_pull = 0;
            check(afmesh_request_info(batch[r], &worker, &num_push, &num_pull));
            afmesh_tensor in{};
            uint64_t key = 0;
            check(afmesh_request_push(batch[r], 0, &key, &in));
            if (num_push != 1 || num_pull != 1 || in.bytes != elems * sizeof(float) || in.ndim != 2)
                fail("unexpected request shape from worker " + std::to_string(worker));
            // The iteration is encoded in the pushed values: recover it for the dynamic row count.
            const float *x = static_cast<const float *>(in.data);
            const int iter = (static_cast<int>(x[0]) - worker * 1000) / 10;
            const int rows = answered_rows(o, iter, rank);
            float *y = out.data() + (o.respond_vec ? elems * r : 0);
            for (size_t i = 0; i < static_cast<size_t>(rows) * o.cols; ++i) y[i] = answered_value(x[i], rank);
            if (o.respond_vec) {
                counts.push_back(rows);
            } else {
                afmesh_tensor t = matrix(y, rows, o.cols);
                node.respond(batch[r], {t});
            }
        }
        if (o.respond_vec) {
            // respond_vec slices consecutive rows; pack each answer at its offset.
            std::vector<float> packed;
            for (size_t r = 0; r < count; ++r)
                packed.insert(packed.end(), out.begin() + elems * r, out.begin() + elems * r + counts[r] * o.cols);
            int64_t total = 0;
            for (int64_t c : counts) total += c;
            afmesh_tensor buffer = matrix(packed.data(), static_cast<int>(total), o.cols);
            check(afmesh_respond_vec(node.get(), &buffer, counts.data(), batch.data(), count));
        }
        answered += static_cast<int>(count);
    }
    if (o.expect_peer_failure) fail("no peer failure was reported");
    printf("server %d: answered %d requests\n", rank, answered);
    return 0;
}

}  // namespace

int main(int argc, char **argv) {
    Options o = parse(argc, argv);
    const afmesh_role role = role_from_env();
    if (o.scenario == "join") {
        afmesh_config config{};
        config.struct_size = sizeof config;
        config.role = role;
        afmesh_node *node = nullptr;
        afmesh_status st = afmesh_node_create(&config, &node);
        printf("join: %s: %s\n", afmesh_strerror(st), afmesh_last_error());
        if (node) afmesh_node_destroy(node);
        return o.expect == afmesh_strerror(st) ? 0 : 1;
    }
    if (o.scenario != "echo") fail("unknown scenario " + o.scenario);
    try {
        Node node(role);
        if (role == AFMESH_ROLE_SCHEDULER) return 0;  // serves until every node has stopped (in the destructor)
        return role == AFMESH_ROLE_WORKER ? run_worker(node, o) : run_server(node, o);
    } catch (const Error &e) {
        // Any call may be the one that learns of a peer's death.
        if (o.expect_peer_failure && e.status() == AFMESH_ERR_PEER_FAILED) {
            printf("peer failure reported: %s\n", e.what());
            return 0;
        }
        fail(e.what());
    }
}
