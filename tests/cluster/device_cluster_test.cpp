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
    /** Runs scheduler, servers and workers (af_test_node echo --device + args); every node must exit 0. */
    static void run(int workers, int servers, const std::vector<std::string> &server_args,
                    const std::vector<std::string> &worker_args) {
        Cluster c(workers, servers);
        for (const char *setting : {"AFMESH_DEVICE=fakegpu", "AFMESH_TRANSPORT=tcp",
                                    "AFMESH_MODULE_PATH=" FAKE_GPU_MODULE_DIR})
            c.set(setting);
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
    for (const char *setting : {"AFMESH_DEVICE=fakegpu", "AFMESH_TRANSPORT=tcp", "AFMESH_MODULE_PATH=" FAKE_GPU_MODULE_DIR})
        c.set(setting);
    const std::vector<std::string> args = {"echo", "--device", "--iters", "4", "--microbatches", "2"};
    std::vector<std::string> server_args = args;
    server_args.push_back("--retry-get-batch");
    c.add({"scheduler", -1, {"echo"}, {}});
    c.add({"server", 0, server_args, {"FAKEGPU_FAIL_COPY_INTO_DEVICE=1"}});
    for (int w = 0; w < 2; ++w) c.add({"worker", w, args, {}});
    c.expect_all_succeed();
    EXPECT_NE(c.output_of("server 0").find("injected copy failure"), std::string::npos);
    EXPECT_NE(c.output_of("server 0").find("answered 16 requests (get_batch retried 1 times)"), std::string::npos);
}

// The fake GPU's streams run nothing while they wait on a flag. Push-pulls
// issued behind a held stream must return at once and stay in progress;
// once the flag releases the stream, the progress thread posts them, and
// the pushes carry what the stream produced after the calls returned.
TEST(DeviceCluster, PushPullsBehindAHeldStreamReturnAtOnceAndGoOnceItRuns) {
    DeviceCluster::run(2, 2, {"--microbatches", "3"}, {"--microbatches", "3", "--held-stream"});
}

}  // namespace
}  // namespace afmesh
