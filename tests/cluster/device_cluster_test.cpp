// SPDX-License-Identifier: Apache-2.0
// Device tensors on real local clusters, without a GPU: every node runs the
// fake GPU device module (tests/modules/fake_gpu_module.c), whose "device
// memory" is a kind the tcp transport refuses, so the engine must stage
// pushes, pulls, receive buffers and responses through pinned host memory.
// af_test_node --device checks every byte the worker pulls (and that nothing
// is written past a short answer) and every byte the server is handed.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cluster_harness.h"

namespace afmesh {
namespace {

struct DeviceCluster {
    /** Every node on the fake GPU and the tcp transport. */
    static void use_fake_gpu(Cluster &c) {
        for (const char *setting : {"AFMESH_DEVICE=fakegpu", "AFMESH_TRANSPORT=tcp",
                                    "AFMESH_MODULE_PATH=" FAKE_GPU_MODULE_DIR})
            c.set(setting);
    }

    /** Runs scheduler, servers and workers (af_test_node echo --device + args); every node must exit 0. */
    static void run(int workers, int servers, const std::vector<std::string> &server_args,
                    const std::vector<std::string> &worker_args) {
        Cluster c(workers, servers);
        use_fake_gpu(c);
        auto args = [](const std::vector<std::string> &extra) {
            std::vector<std::string> argv = {"echo", "--device", "--iters", "6"};
            argv.insert(argv.end(), extra.begin(), extra.end());
            return argv;
        };
        c.add_all(args(server_args), args(worker_args));
        c.expect_all_succeed();
        for (int w = 0; w < workers; ++w)
            EXPECT_NE(c.output_of("worker " + std::to_string(w)).find("verified"), std::string::npos);
    }
};

TEST(DeviceCluster, OneByOneStagesPushesPullsAndReceiveBuffers) { DeviceCluster::run(1, 1, {}, {}); }

TEST(DeviceCluster, TwoByTwoWithThreeMicroBatchesInFlight) {
    DeviceCluster::run(2, 2, {"--microbatches", "3"}, {"--microbatches", "3"});
}

TEST(DeviceCluster, ShortResponsesReachTheDeviceWithoutTouchingTheRest) {
    DeviceCluster::run(2, 2, {"--dynamic"}, {"--dynamic"});
}

TEST(DeviceCluster, RespondVecFromDeviceMemory) {
    DeviceCluster::run(2, 1, {"--dynamic", "--respond-vec"}, {"--dynamic", "--respond-vec"});
}

TEST(DeviceCluster, UnregisteredDeviceTensorsGoThroughRendezvous) {
    DeviceCluster::run(2, 2, {"--unregistered"}, {"--unregistered"});
}

// The fake GPU runs a released stream inside flag_write, so a flag written
// before the staged answers reach the device shows up as sentinel bytes.
TEST(DeviceCluster, StreamWaitReleasesTheStreamAfterTheAnswersLanded) {
    const std::vector<std::string> args = {"--dynamic", "--microbatches", "1", "--stream-wait"};
    DeviceCluster::run(2, 2, args, args);
}

// The first copy of a staged push into server 0's device receive buffer
// fails: get_batch reports it and keeps the batch, which the retry then
// gets whole, so every worker still verifies every answer.
TEST(DeviceCluster, AFailedCopyToTheDeviceLosesNoRequest) {
    Cluster c(2, 1);
    DeviceCluster::use_fake_gpu(c);
    const std::vector<std::string> args = {"echo", "--device", "--iters", "4", "--microbatches", "2"};
    std::vector<std::string> server_args = args;
    server_args.push_back("--retry-get-batch");
    c.add({"scheduler", -1, {"echo"}, {}});
    c.add({"server", 0, server_args, {"FAKEGPU_FAIL_COPY_INTO_DEVICE=1"}});
    for (int w = 0; w < 2; ++w) c.add({"worker", w, args, {}});
    c.expect_all_succeed();
    EXPECT_NE(c.output_of("server 0").find("injected copy failure"), std::string::npos);
    EXPECT_NE(c.output_of("server 0").find("answered 16 requests (get_batch retried 1 times, 0 responds failed)"), std::string::npos);
}

// The fake GPU's streams run nothing while they wait on a flag. Push-pulls
// issued behind a held stream must return at once and stay in progress;
// once the flag releases the stream, the progress thread posts them, and
// the pushes carry what the stream produced after the calls returned.
TEST(DeviceCluster, PushPullsBehindAHeldStreamReturnAtOnceAndGoOnceItRuns) {
    DeviceCluster::run(2, 2, {"--microbatches", "3"}, {"--microbatches", "3", "--held-stream"});
}

// With 4 KiB chunks a staged 13 x 300 float tensor (15,600 bytes) travels
// in four pieces both ways. A push is copied in four pieces, each followed
// by an event, and each piece is sent once its event has run: the fake GPU
// runs a stream only up to the event queried, so a piece sent early would
// carry stale bytes, which the echo would show. An answer is copied to
// pinned memory a piece at a time, each written before the next is copied.
// Server 0 and worker 0 trace how many writes each message took.
TEST(DeviceCluster, StagedTensorsTravelChunkByChunkAndArriveWhole) {
    Cluster c(2, 2);
    DeviceCluster::use_fake_gpu(c);
    c.set("AFMESH_STAGING_CHUNK=4096");
    const std::vector<std::string> args = {"echo", "--device", "--iters", "6", "--rows", "13", "--cols", "300"};
    c.add({"scheduler", -1, {"echo"}, {}});
    c.add({"server", 0, args, {"AFMESH_LOG_LEVEL=trace"}});
    c.add({"server", 1, args, {}});
    c.add({"worker", 0, args, {"AFMESH_LOG_LEVEL=trace"}});
    c.add({"worker", 1, args, {}});
    c.expect_all_succeed();
    for (int w = 0; w < 2; ++w)
        EXPECT_NE(c.output_of("worker " + std::to_string(w)).find("verified"), std::string::npos);
    EXPECT_NE(c.output_of("server 0").find("1 pushes arrived in 4 writes"), std::string::npos);
    EXPECT_NE(c.output_of("worker 0").find("1 answers arrived in 4 writes"), std::string::npos);
}

// Worker 0's stream fails while copying the third chunk of its first push
// of the second round (the fake GPU's 11th copy out of device memory: 2
// micro-batches x 4 chunks a round). The two chunks already sent are closed
// with an aborted REQUEST: the server answers it empty and hands out nothing
// half-written, and the slice comes back, so the push-pull issued again
// with the same key goes through and every answer verifies.
TEST(DeviceCluster, AStreamFailingMidPushAbortsItAndTheRetryGoesThrough) {
    Cluster c(2, 1);
    DeviceCluster::use_fake_gpu(c);
    c.set("AFMESH_STAGING_CHUNK=4096");
    const std::vector<std::string> args = {"echo", "--device", "--iters", "4", "--microbatches", "2",
                                           "--rows", "13", "--cols", "300", "--retry-push-pull"};
    c.add({"scheduler", -1, {"echo"}, {}});
    c.add({"server", 0, args, {"AFMESH_LOG_LEVEL=info"}});
    c.add({"worker", 0, args, {"FAKEGPU_FAIL_ASYNC_COPY_FROM_DEVICE=11"}});
    c.add({"worker", 1, args, {}});
    c.expect_all_succeed();
    const std::string worker0 = c.output_of("worker 0");
    EXPECT_NE(worker0.find("injected stream failure"), std::string::npos) << worker0;
    EXPECT_NE(worker0.find("verified (1 push-pulls issued again)"), std::string::npos) << worker0;
    EXPECT_NE(c.output_of("worker 1").find("verified (0 push-pulls issued again)"), std::string::npos);
    const std::string server0 = c.output_of("server 0");
    EXPECT_NE(server0.find("worker 0 aborted the push-pull in slot"), std::string::npos) << server0;
    EXPECT_NE(server0.find("after 2 writes"), std::string::npos) << server0;
    EXPECT_NE(server0.find("answered 16 requests"), std::string::npos) << server0;
}

// Server 0 fails to copy the third chunk of an answer to pinned memory
// (the fake GPU's 24th synchronous copy out of device memory there: each
// request is one copy of its push, read by the test, then four chunks, so
// this is the fifth request's). The two chunks already written are followed
// by a RESPONSE marked failed: respond reports the error, the worker's
// push-pull fails with the server's reason, and its slices come back, so
// the push-pull issued again goes through and every answer verifies.
TEST(DeviceCluster, AnAnswerFailingMidCopyFailsItsPushPullAndTheRetryGoesThrough) {
    Cluster c(2, 1);
    DeviceCluster::use_fake_gpu(c);
    c.set("AFMESH_STAGING_CHUNK=4096");
    const std::vector<std::string> args = {"echo", "--device", "--iters", "4", "--microbatches", "2",
                                           "--rows", "13", "--cols", "300"};
    std::vector<std::string> server_args = args, worker_args = args;
    server_args.push_back("--tolerate-failed-respond");
    worker_args.push_back("--retry-push-pull");
    c.add({"scheduler", -1, {"echo"}, {}});
    c.add({"server", 0, server_args, {"FAKEGPU_FAIL_COPY_FROM_DEVICE=24"}});
    for (int w = 0; w < 2; ++w) c.add({"worker", w, worker_args, {"AFMESH_LOG_LEVEL=trace"}});
    c.expect_all_succeed();
    const std::string server0 = c.output_of("server 0");
    EXPECT_NE(server0.find("respond failed: copying response tensor 0 to pinned memory failed"), std::string::npos)
        << server0;
    EXPECT_NE(server0.find("answered 16 requests (get_batch retried 0 times, 1 responds failed)"), std::string::npos)
        << server0;
    std::string workers = c.output_of("worker 0") + c.output_of("worker 1");
    EXPECT_NE(workers.find("server 0 could not send its whole answer"), std::string::npos) << workers;
    EXPECT_NE(workers.find("1 answers arrived in 2 writes"), std::string::npos) << workers;
    EXPECT_NE(workers.find("verified (1 push-pulls issued again)"), std::string::npos) << workers;
}

}  // namespace
}  // namespace afmesh
