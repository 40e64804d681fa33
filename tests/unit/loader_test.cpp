// SPDX-License-Identifier: Apache-2.0
// The module loader against real shared objects: the purpose-built modules
// of tests/modules (each one a documented outcome) and, where built, the
// project's own cpu and tcp modules in the build tree's lib/afmesh.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <map>
#include <ostream>
#include <tuple>

#include "config.h"
#include "module_loader.h"

#ifndef AFMESH_TEST_MODULE_DIR
#error "the build must define AFMESH_TEST_MODULE_DIR (tests/modules output root)"
#endif
#ifndef AFMESH_BUILD_MODULE_DIR
#error "the build must define AFMESH_BUILD_MODULE_DIR (the build tree's lib/afmesh)"
#endif
#ifndef AFMESH_INSTALL_MODULE_DIR
#error "the build must define AFMESH_INSTALL_MODULE_DIR"
#endif

namespace afmesh {

// Readable names in assertion messages (found by argument-dependent lookup).
void PrintTo(ModuleState state, std::ostream *os) { *os << module_state_name(state); }
void PrintTo(Code code, std::ostream *os) { *os << code_name(code); }

namespace {

// A test module directory: good, bad, dup_a or dup_b.
std::string test_dir(const char *name) { return std::string(AFMESH_TEST_MODULE_DIR) + "/" + name; }

std::string real_path(const std::string &path) {
    char buf[PATH_MAX];
    return realpath(path.c_str(), buf) ? buf : path;
}

bool exists(const std::string &path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0;
}

bool contains(const std::string &text, std::string_view part) { return text.find(part) != std::string::npos; }

// A configuration whose AFMESH_MODULE_PATH is `dirs`, plus `settings`.
Config config_with(std::initializer_list<std::string> dirs,
                   std::initializer_list<std::pair<const char *, const char *>> settings = {}) {
    Config config;
    std::string path;
    for (const std::string &dir : dirs) path += (path.empty() ? "" : ":") + dir;
    EXPECT_TRUE(config.set("AFMESH_MODULE_PATH", path));
    for (const auto &[name, value] : settings) EXPECT_TRUE(config.set(name, value)) << name;
    return config;
}

// The record of `file` (e.g. "libafmesh_dev_good.so") in `dir`, as discovered.
ModuleRecord discovered(const Config &config, const std::string &dir, const std::string &file) {
    for (const ModuleRecord &r : discover_modules(config))
        if (r.path == dir + "/" + file) return r;
    ADD_FAILURE() << file << " was not discovered in " << dir;
    return {};
}

// Discovers and loads one test module; the record shows the outcome.
struct Probe {
    ModuleRecord record;
    Status status;
    std::unique_ptr<Module> module;
};

Probe probe(const char *dir, const std::string &file) {
    Probe p;
    p.record = discovered(config_with({test_dir(dir)}), test_dir(dir), file);
    p.status = load_module(p.record, &p.module);
    return p;
}

// ---- one module, one outcome ----

TEST(loader_outcomes, GoodDeviceModuleLoads) {
    Probe p = probe("good", "libafmesh_dev_good.so");
    ASSERT_TRUE(p.status) << p.status.to_string();
    EXPECT_EQ(p.record.state, ModuleState::kLoaded);
    EXPECT_EQ(p.record.kind, AFMESH_MODULE_DEVICE);
    EXPECT_EQ(p.record.name, "good");
    EXPECT_EQ(p.record.version, "test-good");
    EXPECT_EQ(p.record.abi_major, unsigned{AFMESH_HAL_ABI_MAJOR});
    EXPECT_EQ(p.record.reason, "");
    ASSERT_NE(p.module, nullptr);
    EXPECT_EQ(p.module->name(), "good");
    EXPECT_EQ(p.module->kind(), AFMESH_MODULE_DEVICE);
    EXPECT_NE(p.module->ctx(), nullptr);
    int count = 0;
    EXPECT_EQ(p.module->device().device_count(p.module->ctx(), &count), AFMESH_HAL_OK);
    EXPECT_EQ(count, 1);
}

TEST(loader_outcomes, GoodTransportModuleLoadsAndReportsCaps) {
    Probe p = probe("good", "libafmesh_net_good.so");
    ASSERT_TRUE(p.status) << p.status.to_string();
    EXPECT_EQ(p.record.kind, AFMESH_MODULE_TRANSPORT);
    ASSERT_NE(p.module, nullptr);
    const afmesh_net_caps &caps = p.module->net_caps();
    EXPECT_EQ(caps.struct_size, sizeof caps) << "the core sets struct_size before init";
    EXPECT_EQ(caps.imm_bytes, 4u);
    EXPECT_EQ(caps.flags, AFMESH_NET_CAP_ORDERED);
    EXPECT_EQ(caps.mem_kinds, AFMESH_MEM_BIT(AFMESH_MEM_HOST));
    EXPECT_EQ(p.record.abi_minor, unsigned{AFMESH_HAL_ABI_MINOR});
    EXPECT_EQ(p.record.details, "test transport 'good'\nsecond line of its account");
}

TEST(loader_outcomes, TransportBuiltAgainstAbi1_0LoadsWithoutTheNewerEntries) {
    Probe p = probe("abi10", "libafmesh_net_old.so");
    ASSERT_TRUE(p.status) << p.status.to_string();
    EXPECT_EQ(p.record.abi_minor, 0u);
    EXPECT_EQ(p.record.details, "") << "describe() lies past the table's struct_size and must not be called";
}

TEST(loader_outcomes, WrongAbiMajorIsUnsupportedVersion) {
    Probe p = probe("bad", "libafmesh_dev_badabi.so");
    EXPECT_EQ(p.status.code(), Code::kUnsupportedVersion);
    EXPECT_EQ(p.record.state, ModuleState::kError);
    EXPECT_EQ(p.record.abi_major, 99u);
    EXPECT_TRUE(contains(p.record.reason, "unsupported ABI version")) << p.record.reason;
    EXPECT_TRUE(contains(p.record.reason, "the module 99.")) << p.record.reason;
    EXPECT_EQ(p.module, nullptr);
}

TEST(loader_outcomes, InitNotPresentCarriesTheModulesReason) {
    Probe p = probe("bad", "libafmesh_dev_absent.so");
    EXPECT_EQ(p.status.code(), Code::kNotPresent);
    EXPECT_EQ(p.record.state, ModuleState::kNotPresent);
    EXPECT_EQ(p.record.reason, "no test accelerator on this host");
    EXPECT_TRUE(contains(p.status.message(), p.record.path)) << p.status.message();
    EXPECT_EQ(p.module, nullptr);
}

TEST(loader_outcomes, InitErrorCarriesTheModulesReason) {
    Probe p = probe("bad", "libafmesh_dev_broken.so");
    EXPECT_EQ(p.status.code(), Code::kError);
    EXPECT_EQ(p.record.state, ModuleState::kError);
    EXPECT_EQ(p.record.reason, "test driver is wedged");
    EXPECT_EQ(p.module, nullptr);
}

TEST(loader_outcomes, MissingQuerySymbolIsAnError) {
    Probe p = probe("bad", "libafmesh_dev_nosym.so");
    EXPECT_EQ(p.record.state, ModuleState::kError);
    EXPECT_TRUE(contains(p.record.reason, "no symbol afmesh_module_query")) << p.record.reason;
}

TEST(loader_outcomes, DescriptorNameMustMatchTheFileName) {
    Probe p = probe("bad", "libafmesh_dev_misnamed.so");
    EXPECT_EQ(p.record.state, ModuleState::kError);
    EXPECT_TRUE(contains(p.record.reason, "'somethingelse'")) << p.record.reason;
    EXPECT_TRUE(contains(p.record.reason, "does not match its file name")) << p.record.reason;
}

TEST(loader_outcomes, DescriptorKindMustMatchTheFilePrefix) {
    Probe p = probe("bad", "libafmesh_net_wrongkind.so");
    EXPECT_EQ(p.record.kind, AFMESH_MODULE_TRANSPORT) << "the file name decides the expected kind";
    EXPECT_EQ(p.record.state, ModuleState::kError);
    EXPECT_TRUE(contains(p.record.reason, "file name says transport")) << p.record.reason;
}

TEST(loader_outcomes, FileThatIsNotASharedObjectFailsInDlopen) {
    Probe p = probe("bad", "libafmesh_dev_garbage.so");
    EXPECT_EQ(p.record.state, ModuleState::kError);
    EXPECT_TRUE(contains(p.record.reason, "dlopen failed")) << p.record.reason;
}

// ---- discovery and the search path ----

TEST(loader_search, ModulePathComesFirstInItsOrder) {
    Config config = config_with({test_dir("dup_b") + "/", test_dir("dup_a"), test_dir("dup_b")});
    std::vector<std::string> dirs = module_search_dirs(config);
    ASSERT_GE(dirs.size(), 3u);
    EXPECT_EQ(dirs[0], test_dir("dup_b")) << "trailing slash trimmed";
    EXPECT_EQ(dirs[1], test_dir("dup_a"));
    EXPECT_EQ(std::count(dirs.begin(), dirs.end(), test_dir("dup_b")), 1) << "each directory once";
    EXPECT_EQ(dirs.back(), AFMESH_INSTALL_MODULE_DIR) << "the install directory is searched last";
}

TEST(loader_search, BuildTreeModuleDirIsFoundWithoutEnvironment) {
    if (!exists(AFMESH_BUILD_MODULE_DIR)) GTEST_SKIP() << "no module has been built into " << AFMESH_BUILD_MODULE_DIR;
    std::vector<std::string> dirs = module_search_dirs(Config());
    ASSERT_GE(dirs.size(), 2u);
    EXPECT_EQ(real_path(dirs[0]), real_path(AFMESH_BUILD_MODULE_DIR));
}

TEST(loader_search, EarlierDirectoryWinsAndTheLaterIsShadowed) {
    for (auto [first, second] : {std::pair{"dup_a", "dup_b"}, std::pair{"dup_b", "dup_a"}}) {
        SCOPED_TRACE(std::string(first) + " before " + second);
        Config config = config_with({test_dir(first), test_dir(second)});
        ModuleRecord winner = discovered(config, test_dir(first), "libafmesh_dev_dup.so");
        ModuleRecord loser = discovered(config, test_dir(second), "libafmesh_dev_dup.so");
        EXPECT_EQ(winner.state, ModuleState::kFound);
        EXPECT_EQ(loser.state, ModuleState::kShadowed);
        EXPECT_EQ(loser.reason, "shadowed by " + winner.path);

        ASSERT_TRUE(config.set("AFMESH_DEVICE", "dup"));
        std::unique_ptr<Module> module;
        std::vector<ModuleRecord> tried;
        ASSERT_TRUE(select_module(config, AFMESH_MODULE_DEVICE, &module, &tried));
        EXPECT_EQ(module->version(), std::string("test-") + first);
        ASSERT_EQ(tried.size(), 1u) << "a shadowed file is never tried";
        EXPECT_EQ(tried[0].path, winner.path);
    }
}

TEST(loader_search, OnlyModuleFileNamesAreDiscovered) {
    Config config = config_with({test_dir("good")});
    for (const ModuleRecord &r : discover_modules(config)) {
        std::string file = r.path.substr(r.path.rfind('/') + 1);
        EXPECT_EQ(file, (r.kind == AFMESH_MODULE_DEVICE ? "libafmesh_dev_" : "libafmesh_net_") + r.name + ".so");
        EXPECT_EQ(r.state, ModuleState::kFound);
    }
}

// The project's own modules, found beside the core with no environment at all.
TEST(loader_search, BuildTreeModulesLoadWithoutEnvironment) {
    const std::pair<afmesh_module_kind, const char *> expected[] = {
        {AFMESH_MODULE_DEVICE, "libafmesh_dev_cpu.so"}, {AFMESH_MODULE_TRANSPORT, "libafmesh_net_tcp.so"}};
    int checked = 0;
    for (const auto &[kind, file] : expected) {
        std::string path = std::string(AFMESH_BUILD_MODULE_DIR) + "/" + file;
        if (!exists(path)) continue;
        SCOPED_TRACE(file);
        ++checked;
        std::vector<ModuleRecord> found = discover_modules(Config());
        auto it = std::find_if(found.begin(), found.end(),
                               [&](const ModuleRecord &r) { return real_path(r.path) == real_path(path); });
        ASSERT_NE(it, found.end()) << path << " exists but was not discovered";
        EXPECT_EQ(it->kind, kind);
        std::unique_ptr<Module> module;
        Status s = load_module(*it, &module);
        EXPECT_TRUE(s) << s.to_string();
        EXPECT_EQ(it->state, ModuleState::kLoaded);
    }
    if (checked == 0) GTEST_SKIP() << "neither the cpu nor the tcp module is built yet";
}

// ---- selection ----

TEST(loader_selection, ExplicitListFallsThroughFailuresInOrder) {
    Config config = config_with({test_dir("bad"), test_dir("good")}, {{"AFMESH_DEVICE", "absent,broken,good"}});
    std::unique_ptr<Module> module;
    std::vector<ModuleRecord> tried;
    Status s = select_module(config, AFMESH_MODULE_DEVICE, &module, &tried);
    ASSERT_TRUE(s) << s.to_string();
    EXPECT_EQ(module->name(), "good");
    ASSERT_EQ(tried.size(), 3u);
    EXPECT_EQ(tried[0].name, "absent");
    EXPECT_EQ(tried[0].state, ModuleState::kNotPresent);
    EXPECT_EQ(tried[1].name, "broken");
    EXPECT_EQ(tried[1].state, ModuleState::kError);
    EXPECT_EQ(tried[2].name, "good");
    EXPECT_EQ(tried[2].state, ModuleState::kLoaded);
}

TEST(loader_selection, ExplicitModuleThatFailsIsAnErrorWithItsReason) {
    Config config = config_with({test_dir("bad")}, {{"AFMESH_DEVICE", "broken"}});
    std::unique_ptr<Module> module;
    Status s = select_module(config, AFMESH_MODULE_DEVICE, &module);
    EXPECT_FALSE(s);
    EXPECT_EQ(module, nullptr);
    EXPECT_TRUE(contains(s.message(), "AFMESH_DEVICE=broken")) << s.message();
    EXPECT_TRUE(contains(s.message(), "test driver is wedged")) << s.message();
}

TEST(loader_selection, ExplicitNotPresentModuleIsAnErrorToo) {
    Config config = config_with({test_dir("bad")}, {{"AFMESH_DEVICE", "absent"}});
    std::unique_ptr<Module> module;
    Status s = select_module(config, AFMESH_MODULE_DEVICE, &module);
    EXPECT_FALSE(s);
    EXPECT_TRUE(contains(s.message(), "no test accelerator on this host")) << s.message();
}

TEST(loader_selection, ExplicitNameNotOnThePathNamesTheDirectoriesSearched) {
    for (auto [kind, variable, file] :
         {std::tuple{AFMESH_MODULE_DEVICE, "AFMESH_DEVICE", "libafmesh_dev_nosuch.so"},
          std::tuple{AFMESH_MODULE_TRANSPORT, "AFMESH_TRANSPORT", "libafmesh_net_nosuch.so"}}) {
        SCOPED_TRACE(variable);
        Config config = config_with({test_dir("good")}, {{variable, "nosuch"}});
        std::unique_ptr<Module> module;
        Status s = select_module(config, kind, &module);
        EXPECT_EQ(s.code(), Code::kNotFound);
        EXPECT_TRUE(contains(s.message(), file)) << s.message();
        for (const std::string &dir : module_search_dirs(config))
            EXPECT_TRUE(contains(s.message(), dir)) << s.message() << "\n does not name " << dir;
    }
}

TEST(loader_selection, ExplicitNameSelectsOnlyItsOwnKind) {
    Config config = config_with({test_dir("good")}, {{"AFMESH_TRANSPORT", "good"}});
    std::unique_ptr<Module> module;
    ASSERT_TRUE(select_module(config, AFMESH_MODULE_TRANSPORT, &module));
    EXPECT_EQ(module->kind(), AFMESH_MODULE_TRANSPORT);
    EXPECT_EQ(module->net_caps().imm_bytes, 4u);
}

// Auto mode's rank of a module name: the built-in order, third-party
// modules after the listed ones and before the portable fallback.
int auto_rank(afmesh_module_kind kind, const std::string &name) {
    const std::vector<std::string> order = kind == AFMESH_MODULE_DEVICE
                                               ? std::vector<std::string>{"cuda", "hip", "ze", "*", "cpu"}
                                               : std::vector<std::string>{"ibverbs", "fabric", "*", "tcp"};
    auto it = std::find(order.begin(), order.end(), name);
    if (it == order.end()) it = std::find(order.begin(), order.end(), "*");
    return static_cast<int>(it - order.begin());
}

// In auto mode failures are skipped, modules are tried in priority order, and
// a loadable third-party module ("good") beats the portable fallback. A
// higher-priority built-in module (cuda, ibverbs...) may legitimately win on
// a host that has one.
TEST(loader_selection, AutoTriesInPriorityOrderAndSkipsFailures) {
    for (auto [kind, variable] :
         {std::pair{AFMESH_MODULE_DEVICE, "AFMESH_DEVICE"}, std::pair{AFMESH_MODULE_TRANSPORT, "AFMESH_TRANSPORT"}}) {
        SCOPED_TRACE(variable);
        Config config = config_with({test_dir("bad"), test_dir("good")}, {{variable, "auto"}});
        std::unique_ptr<Module> module;
        std::vector<ModuleRecord> tried;
        Status s = select_module(config, kind, &module, &tried);
        ASSERT_TRUE(s) << s.to_string();
        ASSERT_FALSE(tried.empty());
        EXPECT_EQ(tried.back().name, module->name());
        EXPECT_EQ(tried.back().state, ModuleState::kLoaded);
        for (size_t i = 0; i + 1 < tried.size(); ++i) {
            EXPECT_NE(tried[i].state, ModuleState::kLoaded) << tried[i].name << " loaded but was passed over";
            EXPECT_LE(auto_rank(kind, tried[i].name), auto_rank(kind, tried[i + 1].name))
                << tried[i].name << " was tried before " << tried[i + 1].name;
        }
        EXPECT_LT(auto_rank(kind, module->name()), auto_rank(kind, kind == AFMESH_MODULE_DEVICE ? "cpu" : "tcp"))
            << "the fallback " << module->name() << " won over the loadable module 'good'";
    }
}

TEST(loader_selection, AutoReportsEveryFailingThirdPartyModuleItPassed) {
    Config config = config_with({test_dir("bad"), test_dir("good")}, {{"AFMESH_DEVICE", "auto"}});
    std::unique_ptr<Module> module;
    std::vector<ModuleRecord> tried;
    ASSERT_TRUE(select_module(config, AFMESH_MODULE_DEVICE, &module, &tried));
    if (module->name() != "good") GTEST_SKIP() << "the built-in '" << module->name() << "' loads on this host";
    std::map<std::string, ModuleState> states;
    for (const ModuleRecord &r : tried) states[r.name] = r.state;
    EXPECT_EQ(states["absent"], ModuleState::kNotPresent);
    for (const char *name : {"badabi", "broken", "garbage", "misnamed", "nosym"})
        EXPECT_EQ(states[name], ModuleState::kError) << name;
}

}  // namespace
}  // namespace afmesh
