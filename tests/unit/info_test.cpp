// SPDX-License-Identifier: Apache-2.0
// The `afmesh` command, run as the built bin/afmesh in a child process:
// the dispatcher, `afmesh info` in text and JSON, exit statuses and messages.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include <climits>
#include <cstdlib>
#include <set>

#include "afmesh/hal/module.h"
#include "child_process.h"
#include "config.h"
#include "sysfs_machines.h"

#ifndef AFMESH_BIN
#error "the build must define AFMESH_BIN (the afmesh executable)"
#endif
#ifndef AFMESH_TEST_MODULE_DIR
#error "the build must define AFMESH_TEST_MODULE_DIR (tests/modules output root)"
#endif
#ifndef AFMESH_BUILD_MODULE_DIR
#error "the build must define AFMESH_BUILD_MODULE_DIR (the build tree's lib/afmesh)"
#endif
#ifndef AFMESH_VERSION_STRING
#error "the build must define AFMESH_VERSION_STRING"
#endif

namespace afmesh {
namespace {

using test::ChildResult;
using Json = nlohmann::json;

std::string test_dir(const char *name) { return std::string(AFMESH_TEST_MODULE_DIR) + "/" + name; }

bool contains(const std::string &text, std::string_view part) { return text.find(part) != std::string::npos; }

// Runs bin/afmesh with `args` and only the afmesh variables in `vars`
// (test::run_tool). argv[0] is `argv0`: the full path unless a test says otherwise.
ChildResult afmesh(std::vector<std::string> args, std::initializer_list<std::string> vars = {},
                   const std::string &argv0 = AFMESH_BIN) {
    ChildResult r = test::run_tool(AFMESH_BIN, std::move(args), vars, argv0);
    EXPECT_EQ(r.spawn_error, "");
    EXPECT_EQ(r.signal, 0) << "afmesh was killed; stderr:\n" << r.err;
    return r;
}

// Settings that select the purpose-built "good" modules, so a result does not
// depend on which real modules are built or usable on this host.
const std::string kGoodPath = "AFMESH_MODULE_PATH=" + test_dir("good");
const std::string kGoodDevice = "AFMESH_DEVICE=good";
const std::string kGoodTransport = "AFMESH_TRANSPORT=good";

Json parse(const std::string &text) {
    Json doc = Json::parse(text, nullptr, false);
    EXPECT_FALSE(doc.is_discarded()) << "not valid JSON:\n" << text;
    return doc;
}

// A JSON type test, e.g. &Json::is_string.
using IsType = bool (Json::*)() const noexcept;

// The member `key` of `object`, failing the test when it is missing or of the wrong type.
const Json &member(const Json &object, const std::string &key, IsType is_type) {
    static const Json kMissing;
    const bool present = object.is_object() && object.contains(key);
    EXPECT_TRUE(present) << "no member '" << key << "'";
    if (!present) return kMissing;
    const Json &value = object.at(key);
    EXPECT_TRUE((value.*is_type)()) << "member '" << key << "' has the wrong type: " << value.type_name();
    return value;
}

const Json *find_by_name(const Json &array, std::string_view name) {
    for (const Json &item : array)
        if (item.is_object() && item.value("name", "") == name) return &item;
    return nullptr;
}

// ---- afmesh info, text ----

TEST(info_command, SucceedsWithNoEnvironmentUsingTheBuildTreesModules) {
    std::string dir = AFMESH_BUILD_MODULE_DIR;
    struct stat st;
    if (stat((dir + "/libafmesh_dev_cpu.so").c_str(), &st) != 0 || stat((dir + "/libafmesh_net_tcp.so").c_str(), &st) != 0)
        GTEST_SKIP() << "the cpu device and tcp transport modules are not both built in " << dir;
    ChildResult r = afmesh({"info"});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_TRUE(contains(r.out, "libafmesh_dev_cpu.so")) << r.out;
    EXPECT_TRUE(contains(r.out, "libafmesh_net_tcp.so")) << r.out;
}

// A shell that finds `afmesh` on PATH passes the bare name as argv[0]; the
// modules beside the program must be found all the same.
TEST(info_command, FindsTheBuildTreesModulesWhenRunByBareName) {
    char resolved[PATH_MAX];
    if (!realpath(AFMESH_BUILD_MODULE_DIR, resolved)) GTEST_SKIP() << "no module built in " << AFMESH_BUILD_MODULE_DIR;
    ChildResult r = afmesh({"info", "--json"}, {}, "afmesh");
    Json doc = parse(r.out);
    const Json &dirs = member(doc, "search_dirs", &Json::is_array);
    ASSERT_FALSE(dirs.empty()) << r.out;
    EXPECT_EQ(dirs[0].get<std::string>(), resolved);
}

TEST(info_command, ListsSearchPathAndEveryModuleWithItsStatus) {
    std::string path = "AFMESH_MODULE_PATH=" + test_dir("good") + ":" + test_dir("bad") + ":" + test_dir("dup_a") +
                       ":" + test_dir("dup_b");
    ChildResult r = afmesh({"info"}, {path, kGoodDevice, kGoodTransport});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    size_t good = r.out.find("1. " + test_dir("good")), bad = r.out.find("2. " + test_dir("bad")),
           dup_a = r.out.find("3. " + test_dir("dup_a")), dup_b = r.out.find("4. " + test_dir("dup_b"));
    EXPECT_TRUE(good < bad && bad < dup_a && dup_a < dup_b && dup_b != std::string::npos) << r.out;
    for (std::string expected :
         {std::string("loaded"), std::string("not present: no test accelerator on this host"),
          std::string("error: test driver is wedged"), std::string("error: unsupported ABI version"),
          std::string("error: no symbol afmesh_module_query"), std::string("'somethingelse'"),
          std::string("file name says transport"), std::string("error: dlopen failed"),
          "shadowed by " + test_dir("dup_a") + "/libafmesh_dev_dup.so"})
        EXPECT_TRUE(contains(r.out, expected)) << "missing '" << expected << "' in\n" << r.out;
}

TEST(info_command, ShowsTheSelectionWithDevicesAndTransportCaps) {
    ChildResult r = afmesh({"info"}, {kGoodPath, kGoodDevice, kGoodTransport});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_TRUE(contains(r.out, "device     good  (version test-good)")) << r.out;
    EXPECT_TRUE(contains(r.out, "device 0: test device 'good'")) << r.out;
    EXPECT_TRUE(contains(r.out, "transport  good  (version test-good)")) << r.out;
    EXPECT_TRUE(contains(r.out, "flags: ordered")) << r.out;
    EXPECT_TRUE(contains(r.out, "immediate: 4 B")) << r.out;
    EXPECT_TRUE(contains(r.out, "        test transport 'good'\n        second line of its account\n")) << r.out;
}

TEST(info_command, SaysWhatRidesEagerlyAndWhoDecided) {
    ChildResult by_module = afmesh({"info"}, {kGoodPath, kGoodDevice, kGoodTransport});
    ASSERT_EQ(by_module.exit_code, 0) << by_module.err;
    EXPECT_TRUE(contains(by_module.out, "eager: up to 4096 B of tensors ride inside a request or answer of up to 4096 B "
                                        "(from the transport)\n"))
        << "its eager_send_size, capped at its max_send_size:\n" << by_module.out;

    ChildResult by_user = afmesh({"info", "--json"}, {kGoodPath, kGoodDevice, kGoodTransport, "AFMESH_EAGER_BYTES=0"});
    ASSERT_EQ(by_user.exit_code, 0) << by_user.err;
    const Json eager = member(member(parse(by_user.out), "transport", &Json::is_object), "eager", &Json::is_object);
    EXPECT_EQ(member(eager, "max_bytes", &Json::is_number).get<uint64_t>(), 0u);
    EXPECT_EQ(member(eager, "source", &Json::is_string).get<std::string>(), "AFMESH_EAGER_BYTES");
}

TEST(info_command, ListsEveryVariableWithValueOriginAndDoc) {
    ChildResult r = afmesh({"info"}, {kGoodPath, kGoodDevice, kGoodTransport, "AFMESH_POLL=busy"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const VarSpec &spec : config_vars()) {
        EXPECT_TRUE(contains(r.out, spec.name)) << spec.name;
        EXPECT_TRUE(contains(r.out, spec.doc)) << spec.name;
    }
    size_t poll = r.out.find("AFMESH_POLL ");
    ASSERT_NE(poll, std::string::npos);
    std::string poll_line = r.out.substr(poll, r.out.find('\n', poll) - poll);
    EXPECT_TRUE(contains(poll_line, " set ") && contains(poll_line, " busy")) << poll_line;
    size_t level = r.out.find("AFMESH_LOG_LEVEL ");
    ASSERT_NE(level, std::string::npos);
    EXPECT_TRUE(contains(r.out.substr(level, r.out.find('\n', level) - level), " default "));
}

TEST(info_command, UnknownDeviceFailsNamingWhatWasSearched) {
    ChildResult r = afmesh({"info"}, {kGoodPath, "AFMESH_DEVICE=nosuch", kGoodTransport});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_TRUE(contains(r.err, "AFMESH_DEVICE=nosuch")) << r.err;
    EXPECT_TRUE(contains(r.err, "libafmesh_dev_nosuch.so")) << r.err;
    EXPECT_TRUE(contains(r.err, test_dir("good"))) << r.err;
}

TEST(info_command, UnknownTransportFailsNamingWhatWasSearched) {
    ChildResult r = afmesh({"info"}, {kGoodPath, kGoodDevice, "AFMESH_TRANSPORT=nosuch"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_TRUE(contains(r.err, "AFMESH_TRANSPORT=nosuch")) << r.err;
    EXPECT_TRUE(contains(r.err, "libafmesh_net_nosuch.so")) << r.err;
    EXPECT_TRUE(contains(r.err, test_dir("good"))) << r.err;
}

TEST(info_command, NosuchFailsAlsoWithoutAnyModulePath) {
    for (const char *var : {"AFMESH_DEVICE=nosuch", "AFMESH_TRANSPORT=nosuch"}) {
        ChildResult r = afmesh({"info"}, {var});
        EXPECT_NE(r.exit_code, 0) << var;
        EXPECT_TRUE(contains(r.err, "nosuch.so in ")) << r.err;
    }
}

TEST(info_command, InvalidValueFailsWithTheMessage) {
    ChildResult r = afmesh({"info"}, {kGoodPath, kGoodDevice, kGoodTransport, "AFMESH_POLL=fast"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_TRUE(contains(r.err, "AFMESH_POLL='fast' is not one of busy|adaptive|blocking")) << r.err;
}

TEST(info_command, MisspeltVariableWarnsWithDidYouMean) {
    ChildResult r = afmesh({"info"}, {kGoodPath, kGoodDevice, kGoodTransport, "AFMESH_TRANPORT=tcp"});
    EXPECT_EQ(r.exit_code, 0) << "a misspelt name is a warning: " << r.err;
    EXPECT_TRUE(contains(r.err, "did you mean AFMESH_TRANSPORT")) << r.err;
    EXPECT_TRUE(contains(r.out, "did you mean AFMESH_TRANSPORT")) << "the Notes section lists it too\n" << r.out;
}

// ---- afmesh info: the settings modules declare (ABI 1.4) ----

// The lines of the section that `heading` opens, up to the next blank line.
std::string section(const std::string &text, const std::string &heading) {
    const size_t start = text.find("\n" + heading + "\n");
    if (start == std::string::npos) return "";
    const size_t end = text.find("\n\n", start + 1);
    return text.substr(start + 1, end == std::string::npos ? std::string::npos : end - start - 1);
}

TEST(info_command, ListsEachModulesSettingsAfterTheCoresWithValueAndSource) {
    ChildResult unset = afmesh({"info"}, {kGoodPath, kGoodDevice, kGoodTransport});
    ASSERT_EQ(unset.exit_code, 0) << unset.err;
    const size_t core = unset.out.find("\nSettings:\n");
    const size_t good = unset.out.find("\nSettings of transport module good:\n");
    ASSERT_NE(good, std::string::npos) << unset.out;
    EXPECT_LT(core, good);
    const std::string shown = section(unset.out, "Settings of transport module good:");
    EXPECT_TRUE(contains(shown, "  AFMESH_TESTMOD_GREETING  default  hello\n")) << shown;
    EXPECT_TRUE(contains(shown, "what a test module's describe() greets with")) << shown;
    EXPECT_TRUE(contains(shown, "  AFMESH_TESTMOD_REPEAT    default  1\n")) << shown;
    EXPECT_FALSE(contains(section(unset.out, "Settings:"), "AFMESH_TESTMOD_GREETING")) << "not among the core's";
    EXPECT_TRUE(contains(unset.out, "        AFMESH_TESTMOD_GREETING: hello\n")) << "what the module read:\n" << unset.out;

    ChildResult set = afmesh({"info"}, {kGoodPath, kGoodDevice, kGoodTransport, "AFMESH_TESTMOD_GREETING=bonjour"});
    ASSERT_EQ(set.exit_code, 0) << set.err;
    EXPECT_TRUE(contains(section(set.out, "Settings of transport module good:"),
                         "  AFMESH_TESTMOD_GREETING  env      bonjour\n"))
        << set.out;
    EXPECT_TRUE(contains(set.out, "        AFMESH_TESTMOD_GREETING: bonjour\n"))
        << "the module reads the environment's value:\n" << set.out;
    EXPECT_FALSE(contains(set.out, "unknown variable")) << set.out;
}

TEST(info_command, MisspeltModuleSettingWarnsWithDidYouMean) {
    ChildResult r = afmesh({"info"}, {kGoodPath, kGoodDevice, kGoodTransport, "AFMESH_TESTMOD_GRETING=bonjour",
                                      "AFMESH_ZZZZZZZZZZZZZZZZZZZZ=1"});
    EXPECT_EQ(r.exit_code, 0) << "a misspelt name is a warning: " << r.err;
    const std::string note =
        "unknown variable AFMESH_TESTMOD_GRETING is ignored (did you mean AFMESH_TESTMOD_GREETING?)";
    EXPECT_TRUE(contains(r.out, note)) << "the Notes section lists it\n" << r.out;
    EXPECT_TRUE(contains(r.err, note)) << r.err;
    EXPECT_TRUE(contains(r.out, "unknown variable AFMESH_ZZZZZZZZZZZZZZZZZZZZ is ignored\n")) << r.out;
    EXPECT_TRUE(contains(r.out, "        AFMESH_TESTMOD_GREETING: hello\n")) << "the module reads its default\n"
                                                                             << r.out;
}

TEST(info_command, BadValueOfAModuleSettingFailsWithTheMessage) {
    ChildResult r = afmesh({"info"}, {kGoodPath, kGoodDevice, kGoodTransport, "AFMESH_TESTMOD_REPEAT=9"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_TRUE(contains(r.err, "afmesh info: AFMESH_TESTMOD_REPEAT=9 is outside [1, 3]")) << r.err;
    EXPECT_TRUE(
        contains(r.out, "AFMESH_TESTMOD_REPEAT=9 is outside [1, 3] (from AFMESH_TESTMOD_REPEAT); using the default"))
        << r.out;
    EXPECT_TRUE(contains(r.out, "        AFMESH_TESTMOD_REPEAT: 1\n")) << "the module reads the default\n" << r.out;
}

TEST(info_command, ModuleAnsweringAbi1_3IsListedWithoutSettings) {
    ChildResult r = afmesh({"info"}, {"AFMESH_MODULE_PATH=" + test_dir("good") + ":" + test_dir("abi13"), kGoodDevice,
                                      "AFMESH_TRANSPORT=older"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "transport  older  (version test-abi13)")) << r.out;
    EXPECT_TRUE(contains(r.out, "ABI 1.3")) << r.out;
    EXPECT_FALSE(contains(r.out, "Settings of transport module older")) << r.out;
    EXPECT_TRUE(contains(r.out, "Settings of transport module good:")) << r.out;
}

TEST(info_command, StepMeshAliasIsShownAsUsed) {
    ChildResult r = afmesh({"info"}, {kGoodPath, kGoodDevice, kGoodTransport, "DMLC_ROLE=worker"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "using DMLC_ROLE as AFMESH_ROLE")) << r.out;
}

TEST(info_command, ShowsTheJobManagerAndWhatTheLayoutMakesOfIt) {
    const std::initializer_list<std::string> torchrun = {kGoodPath, kGoodDevice, kGoodTransport, "RANK=2",
                                                         "WORLD_SIZE=3", "MASTER_ADDR=10.0.0.1", "MASTER_PORT=29500"};
    ChildResult bare = afmesh({"info"}, torchrun);
    EXPECT_TRUE(contains(bare.out, "Job manager:\n  started by torchrun (global rank 2 of 3); set AFMESH_LAYOUT"))
        << bare.out;
    ChildResult text = test::run_tool(AFMESH_BIN, {"info"}, {kGoodPath, kGoodDevice, kGoodTransport, "RANK=2",
                                                              "WORLD_SIZE=3", "MASTER_ADDR=10.0.0.1",
                                                              "MASTER_PORT=29500", "AFMESH_LAYOUT=servers:1"});
    EXPECT_EQ(text.exit_code, 0) << text.err;
    EXPECT_TRUE(contains(text.out, "started by torchrun: global rank 2 of 3 is worker 1 of 2; scheduler "
                                   "10.0.0.1:29501, run by global rank 0"))
        << text.out;
    ChildResult json = test::run_tool(AFMESH_BIN, {"info", "--json"},
                                      {kGoodPath, kGoodDevice, kGoodTransport, "RANK=0", "WORLD_SIZE=3",
                                       "MASTER_ADDR=10.0.0.1", "AFMESH_LAYOUT=workers:2"});
    const Json job = member(parse(json.out), "job", &Json::is_object);
    EXPECT_EQ(member(job, "launcher", &Json::is_string).get<std::string>(), "torchrun");
    const Json &role = member(job, "role", &Json::is_object);
    EXPECT_EQ(member(role, "role", &Json::is_string).get<std::string>(), "worker");
    EXPECT_EQ(member(role, "num_servers", &Json::is_number).get<int>(), 1);
    EXPECT_TRUE(member(role, "runs_scheduler", &Json::is_boolean).get<bool>());
    EXPECT_EQ(member(role, "scheduler", &Json::is_string).get<std::string>(), "10.0.0.1:29510");
}

// ---- afmesh info --topology ----

// `afmesh info --topology` on a machine's layout, with the fake GPU module reporting its GPUs' bus ids.
ChildResult topology_of(const test::SysfsMachine &machine) {
    std::string bus_ids;
    for (const std::string &id : machine.gpus()) bus_ids += (bus_ids.empty() ? "" : ",") + id;
    return afmesh({"info", "--topology"}, {"AFMESH_MODULE_PATH=" + test_dir("fakegpu") + ":" + test_dir("good"),
                                           "AFMESH_DEVICE=fakegpu", kGoodTransport, "FAKEGPU_BUS_IDS=" + bus_ids,
                                           "AFMESH_SYSFS_ROOT=" + machine.root()});
}

TEST(info_topology, PrintsTheGpuByNicMatrixAndEachLocalRanksNic) {
    test::SysfsMachine machine = test::SysfsMachine::eight_by_eight();
    ChildResult r = topology_of(machine);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "8 device(s) of module 'fakegpu', 8 RDMA NIC(s)")) << r.out;
    EXPECT_TRUE(contains(r.out, "\nGPU0   PIX      PIX      NODE     NODE     SYS      SYS      SYS      SYS      0     "
                                "0-31,64-95\n"))
        << r.out;
    EXPECT_TRUE(contains(r.out, "\nGPU6   SYS      SYS      SYS      SYS      NODE     NODE     PIX      PIX      1     "
                                "32-63,96-127\n"))
        << r.out;
    for (int rank = 0; rank < 8; ++rank)
        EXPECT_TRUE(contains(r.out, "  local rank " + std::to_string(rank) + " -> mlx5_" + std::to_string(rank) +
                                        ": PIX (same PCIe switch) from GPU " + machine.gpus()[static_cast<size_t>(rank)]))
            << r.out;
}

TEST(info_topology, FewerNicsThanGpusShareTheirSocketsNic) {
    test::SysfsMachine machine = test::SysfsMachine::eight_by_two();
    ChildResult r = topology_of(machine);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "\nGPU3   NODE     SYS      0     0-31,64-95\n")) << r.out;
    EXPECT_TRUE(contains(r.out, "  local rank 3 -> mlx5_0: NODE (same NUMA node, other root complex)")) << r.out;
    EXPECT_TRUE(contains(r.out, "  local rank 4 -> mlx5_1: PIX")) << r.out;
}

TEST(info_command, AuthTokenIsNeverPrinted) {
    const std::string secret = "hunter2-very-secret";
    for (std::vector<std::string> args : {std::vector<std::string>{"info"}, {"info", "--json"}}) {
        ChildResult r = afmesh(args, {kGoodPath, kGoodDevice, kGoodTransport, "AFMESH_AUTH_TOKEN=" + secret});
        EXPECT_EQ(r.exit_code, 0) << r.err;
        EXPECT_FALSE(contains(r.out, secret)) << r.out;
        EXPECT_FALSE(contains(r.err, secret)) << r.err;
        EXPECT_TRUE(contains(r.out, "AFMESH_AUTH_TOKEN")) << r.out;
    }
}

TEST(info_command, SaysHowTheDataPlaneIsAuthenticatedAndWhoIsAdmitted) {
    ChildResult open = afmesh({"info"}, {kGoodPath, kGoodDevice, kGoodTransport});
    EXPECT_EQ(open.exit_code, 0) << open.err;
    EXPECT_TRUE(contains(open.out, "data plane  authenticated: mutual challenge-response")) << open.out;
    EXPECT_TRUE(contains(open.out, "HMAC-SHA256")) << open.out;
    EXPECT_TRUE(contains(open.out, "admission   open")) << open.out;
    ChildResult guarded = afmesh({"info", "--json"}, {kGoodPath, kGoodDevice, kGoodTransport, "AFMESH_AUTH_TOKEN=t"});
    ASSERT_EQ(guarded.exit_code, 0) << guarded.err;
    const Json doc = parse(guarded.out);
    const Json &security = member(doc, "security", &Json::is_object);
    EXPECT_EQ(member(security, "admission", &Json::is_string).get<std::string>(), "token");
    EXPECT_TRUE(contains(member(security, "data_plane", &Json::is_string).get<std::string>(), "HMAC-SHA256"));
}

// ---- afmesh info --json ----

TEST(info_json, IsValidJsonWithTheDocumentedStructure) {
    ChildResult r = afmesh({"info", "--json"}, {kGoodPath, kGoodDevice, kGoodTransport, "AFMESH_POLL=busy"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    Json doc = parse(r.out);
    ASSERT_TRUE(doc.is_object());
    EXPECT_TRUE(member(doc, "ok", &Json::is_boolean).get<bool>());
    EXPECT_EQ(member(doc, "version", &Json::is_string).get<std::string>(), AFMESH_VERSION_STRING);

    const Json &dirs = member(doc, "search_dirs", &Json::is_array);
    ASSERT_FALSE(dirs.empty());
    EXPECT_EQ(dirs[0].get<std::string>(), test_dir("good"));

    const std::set<std::string> statuses = {"loaded", "not present", "error", "shadowed"};
    const Json &modules = member(doc, "modules", &Json::is_array);
    for (const Json &m : modules) {
        member(m, "kind", &Json::is_string);
        member(m, "name", &Json::is_string);
        member(m, "path", &Json::is_string);
        member(m, "reason", &Json::is_string);
        EXPECT_EQ(statuses.count(member(m, "status", &Json::is_string).get<std::string>()), 1u);
    }
    const Json *good = find_by_name(modules, "good");
    ASSERT_NE(good, nullptr);
    EXPECT_EQ(member(*good, "status", &Json::is_string).get<std::string>(), "loaded");
    EXPECT_EQ(member(*good, "abi", &Json::is_string).get<std::string>(),
              std::to_string(AFMESH_HAL_ABI_MAJOR) + "." + std::to_string(AFMESH_HAL_ABI_MINOR));
    for (const Json &m : modules) {
        if (member(m, "kind", &Json::is_string).get<std::string>() != "transport") continue;
        const Json &details = member(m, "details", &Json::is_array);
        if (m.at("name").get<std::string>() == "good") {
            ASSERT_EQ(details.size(), 4u);
            EXPECT_EQ(details[0].get<std::string>(), "test transport 'good'");
            EXPECT_EQ(details[1].get<std::string>(), "second line of its account");
            EXPECT_EQ(details[2].get<std::string>(), "AFMESH_TESTMOD_GREETING: hello");
        }
    }

    const Json &device = member(doc, "device", &Json::is_object);
    EXPECT_TRUE(member(device, "selected", &Json::is_boolean).get<bool>());
    EXPECT_EQ(member(device, "name", &Json::is_string).get<std::string>(), "good");
    EXPECT_EQ(member(device, "devices", &Json::is_array).size(), 1u);

    const Json &transport = member(doc, "transport", &Json::is_object);
    EXPECT_EQ(member(transport, "name", &Json::is_string).get<std::string>(), "good");
    const Json &caps = member(transport, "caps", &Json::is_object);
    EXPECT_EQ(member(caps, "imm_bytes", &Json::is_number).get<double>(), 4);
    const Json &flags = member(caps, "flags", &Json::is_array);
    ASSERT_EQ(flags.size(), 1u);
    EXPECT_EQ(flags[0].get<std::string>(), "ordered");

    const Json &vars = member(doc, "variables", &Json::is_array);
    ASSERT_EQ(vars.size(), config_vars().size());
    for (size_t i = 0; i < vars.size(); ++i) {
        EXPECT_EQ(member(vars[i], "name", &Json::is_string).get<std::string>(), config_vars()[i].name);
        member(vars[i], "doc", &Json::is_string);
        member(vars[i], "default", &Json::is_string);
    }
    const Json *poll = find_by_name(vars, "AFMESH_POLL");
    ASSERT_NE(poll, nullptr);
    EXPECT_EQ(member(*poll, "value", &Json::is_string).get<std::string>(), "busy");
    EXPECT_TRUE(member(*poll, "set", &Json::is_boolean).get<bool>());
    const Json *level = find_by_name(vars, "AFMESH_LOG_LEVEL");
    ASSERT_NE(level, nullptr);
    EXPECT_FALSE(member(*level, "set", &Json::is_boolean).get<bool>());

    member(doc, "notes", &Json::is_array);
    EXPECT_TRUE(member(doc, "errors", &Json::is_array).empty());

    const Json &modules_vars = member(doc, "module_variables", &Json::is_array);
    for (const Json &m : modules_vars) {
        member(m, "kind", &Json::is_string);
        member(m, "module", &Json::is_string);
        for (const Json &v : member(m, "variables", &Json::is_array)) {
            for (const char *key : {"name", "value", "default", "doc"}) member(v, key, &Json::is_string);
            member(v, "set", &Json::is_boolean);
            const std::string source = member(v, "source", &Json::is_string).get<std::string>();
            EXPECT_TRUE(source == "environment" || source == "default") << source;
        }
    }
}

// The module_variables entry of the module `name` of `kind`, or nullptr.
const Json *module_variables_of(const Json &doc, const std::string &kind, const std::string &name) {
    for (const Json &m : member(doc, "module_variables", &Json::is_array))
        if (m.value("kind", "") == kind && m.value("module", "") == name) return &m;
    return nullptr;
}

TEST(info_json, ListsEachModulesSettingsWithValueAndSource) {
    ChildResult unset = afmesh({"info", "--json"}, {kGoodPath, kGoodDevice, kGoodTransport});
    ASSERT_EQ(unset.exit_code, 0) << unset.err;
    const Json doc = parse(unset.out);
    EXPECT_EQ(find_by_name(member(doc, "variables", &Json::is_array), "AFMESH_TESTMOD_GREETING"), nullptr)
        << "a module's setting is not among the core's";
    const Json *good = module_variables_of(doc, "transport", "good");
    ASSERT_NE(good, nullptr) << unset.out;
    const Json *greeting = find_by_name(member(*good, "variables", &Json::is_array), "AFMESH_TESTMOD_GREETING");
    ASSERT_NE(greeting, nullptr);
    EXPECT_EQ(member(*greeting, "value", &Json::is_string).get<std::string>(), "hello");
    EXPECT_EQ(member(*greeting, "default", &Json::is_string).get<std::string>(), "hello");
    EXPECT_EQ(member(*greeting, "source", &Json::is_string).get<std::string>(), "default");
    EXPECT_FALSE(member(*greeting, "set", &Json::is_boolean).get<bool>());
    EXPECT_EQ(member(*greeting, "doc", &Json::is_string).get<std::string>(),
              "what a test module's describe() greets with");

    ChildResult set =
        afmesh({"info", "--json"}, {kGoodPath, kGoodDevice, kGoodTransport, "AFMESH_TESTMOD_GREETING=bonjour"});
    ASSERT_EQ(set.exit_code, 0) << set.err;
    const Json set_doc = parse(set.out);
    good = module_variables_of(set_doc, "transport", "good");
    ASSERT_NE(good, nullptr) << set.out;
    greeting = find_by_name(member(*good, "variables", &Json::is_array), "AFMESH_TESTMOD_GREETING");
    ASSERT_NE(greeting, nullptr);
    EXPECT_EQ(member(*greeting, "value", &Json::is_string).get<std::string>(), "bonjour");
    EXPECT_EQ(member(*greeting, "source", &Json::is_string).get<std::string>(), "environment");
    EXPECT_TRUE(member(*greeting, "set", &Json::is_boolean).get<bool>());
    EXPECT_TRUE(member(set_doc, "notes", &Json::is_array).empty()) << "a declared name is no unknown variable";
}

TEST(info_json, StringsAreEscaped) {
    const std::string awkward = "a\"b\\c\td\x01" "e/f";
    ChildResult r =
        afmesh({"info", "--json"}, {kGoodPath, kGoodDevice, kGoodTransport, "AFMESH_TESTMOD_GREETING=" + awkward});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    Json doc = parse(r.out);
    const Json *good = module_variables_of(doc, "transport", "good");
    ASSERT_NE(good, nullptr) << r.out;
    const Json *greeting = find_by_name(member(*good, "variables", &Json::is_array), "AFMESH_TESTMOD_GREETING");
    ASSERT_NE(greeting, nullptr);
    EXPECT_EQ(member(*greeting, "value", &Json::is_string).get<std::string>(), awkward);
}

TEST(info_json, FailureIsStillValidJsonWithTheErrors) {
    ChildResult r = afmesh({"info", "--json"}, {kGoodPath, "AFMESH_DEVICE=nosuch", kGoodTransport});
    EXPECT_EQ(r.exit_code, 1);
    Json doc = parse(r.out);
    EXPECT_FALSE(member(doc, "ok", &Json::is_boolean).get<bool>());
    const Json &device = member(doc, "device", &Json::is_object);
    EXPECT_FALSE(member(device, "selected", &Json::is_boolean).get<bool>());
    EXPECT_TRUE(contains(member(device, "error", &Json::is_string).get<std::string>(), "libafmesh_dev_nosuch.so"));
    EXPECT_EQ(member(doc, "errors", &Json::is_array).size(), 1u);
    EXPECT_TRUE(member(member(doc, "transport", &Json::is_object), "selected", &Json::is_boolean).get<bool>());
}

}  // namespace
}  // namespace afmesh
