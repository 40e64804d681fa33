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
#include "eager_policy.h"
#include "env_block.h"
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
    EXPECT_TRUE(p.record.details.starts_with("test transport 'good'\nsecond line of its account\n"))
        << p.record.details;
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

// ---- the settings a module declares (ABI 1.4) ----

bool has_note(const std::vector<std::string> &notes, std::string_view text) {
    return std::any_of(notes.begin(), notes.end(), [&](const std::string &note) { return contains(note, text); });
}

const ModuleVars *declared_by(const std::vector<ModuleVars> &all, afmesh_module_kind kind, const std::string &name) {
    for (const ModuleVars &m : all)
        if (m.kind == kind && m.module == name) return &m;
    return nullptr;
}

Config from(test::EnvBlock env) { return Config::from_env(env.envp()); }

TEST(loader_settings, QueryDeclaresTheModulesSettings) {
    Probe p = probe("good", "libafmesh_net_good.so");
    ASSERT_TRUE(p.status) << p.status.to_string();
    const std::vector<ModuleVars> all = module_vars();
    const ModuleVars *good = declared_by(all, AFMESH_MODULE_TRANSPORT, "good");
    ASSERT_NE(good, nullptr);
    ASSERT_EQ(good->vars.size(), 2u);
    const VarSpec &greeting = *good->vars[0];
    EXPECT_STREQ(greeting.name, "AFMESH_TESTMOD_GREETING");
    EXPECT_EQ(greeting.type, VarType::kString);
    EXPECT_STREQ(greeting.default_value, "hello");
    EXPECT_STREQ(greeting.doc, "what a test module's describe() greets with");
    const VarSpec &repeat = *good->vars[1];
    EXPECT_EQ(repeat.type, VarType::kInt);
    EXPECT_EQ(repeat.min, 1);
    EXPECT_EQ(repeat.max, 3);
    EXPECT_EQ(find_module_var("AFMESH_TESTMOD_GREETING"), &greeting);
    EXPECT_EQ(find_var("AFMESH_TESTMOD_GREETING"), nullptr) << "a module's setting is not the core's";
}

// This process's environment has no AFMESH_TESTMOD_*: the module sees the
// declared defaults. (The environment's values: info_test, in a child.)
TEST(loader_settings, ModuleReadsTheDeclaredDefaultsThroughGetConfig) {
    if (getenv("AFMESH_TESTMOD_GREETING") || getenv("AFMESH_TESTMOD_REPEAT"))
        GTEST_SKIP() << "the environment sets AFMESH_TESTMOD_*";
    Probe p = probe("good", "libafmesh_net_good.so");
    ASSERT_TRUE(p.status) << p.status.to_string();
    EXPECT_TRUE(contains(p.record.details, "\nAFMESH_TESTMOD_GREETING: hello\nAFMESH_TESTMOD_REPEAT: 1"))
        << p.record.details;
    EXPECT_STREQ(host_services()->get_config("AFMESH_TESTMOD_GREETING"), "hello");
}

TEST(loader_settings, ConfigReadsAModulesSettingFromTheEnvironmentElseTheDefault) {
    ASSERT_TRUE(probe("good", "libafmesh_net_good.so").status);
    Config unset = from({});
    EXPECT_FALSE(unset.is_set("AFMESH_TESTMOD_GREETING"));
    EXPECT_EQ(unset.get("AFMESH_TESTMOD_GREETING"), "hello");
    Config set = from({"AFMESH_TESTMOD_GREETING=bonjour", "AFMESH_TESTMOD_REPEAT=3"});
    EXPECT_TRUE(set.is_set("AFMESH_TESTMOD_GREETING"));
    EXPECT_EQ(set.get("AFMESH_TESTMOD_GREETING"), "bonjour");
    EXPECT_EQ(set.get_int("AFMESH_TESTMOD_REPEAT"), 3);
    std::vector<std::string> notes;
    EXPECT_TRUE(check_module_variables(set, &notes));
    EXPECT_TRUE(notes.empty()) << notes.front();
}

// Nothing is loaded first: the check itself queries the modules on the path
// to tell a module's setting from a typo.
TEST(loader_settings, CheckQueriesTheModulesToTellTyposFromTheirSettings) {
    Config config = from({"AFMESH_MODULE_PATH=" + test_dir("good"), "AFMESH_TESTMOD_GRETING=hi",
                          "AFMESH_TESTMOD_REPEAT=2", "AFMESH_ZZZZZZZZZZZZZZZZZZZZ=1"});
    EXPECT_TRUE(config.notes().empty()) << "reading the environment cannot tell yet";
    std::vector<std::string> notes;
    EXPECT_TRUE(check_module_variables(config, &notes)) << "an unknown name is a warning, not an error";
    EXPECT_TRUE(
        has_note(notes, "unknown variable AFMESH_TESTMOD_GRETING is ignored (did you mean AFMESH_TESTMOD_GREETING?)"));
    EXPECT_TRUE(has_note(notes, "unknown variable AFMESH_ZZZZZZZZZZZZZZZZZZZZ is ignored"));
    EXPECT_FALSE(has_note(notes, "AFMESH_ZZZZZZZZZZZZZZZZZZZZ is ignored (did you mean"));
    EXPECT_FALSE(has_note(notes, "AFMESH_TESTMOD_REPEAT")) << "the module declares it";
    EXPECT_EQ(notes.size(), 2u);
    EXPECT_EQ(config.get_int("AFMESH_TESTMOD_REPEAT"), 2);
    EXPECT_EQ(config.get("AFMESH_TESTMOD_GRETING"), "") << "a misspelt name sets nothing";
}

// A node's start-up: once a device and a transport are selected, the check
// runs; it opens another module only for a name the selected ones do not declare.
TEST(loader_settings, SelectionOpensNoOtherModuleUnlessANameIsUndeclared) {
    const std::string path = "AFMESH_MODULE_PATH=" + test_dir("good") + ":" + test_dir("bystander");
    auto select_both = [](const Config &config) {
        std::unique_ptr<Module> device, transport;
        ASSERT_TRUE(select_module(config, AFMESH_MODULE_DEVICE, &device));
        ASSERT_TRUE(select_module(config, AFMESH_MODULE_TRANSPORT, &transport));
    };
    select_both(from({path, "AFMESH_DEVICE=good", "AFMESH_TRANSPORT=good", "AFMESH_TESTMOD_GREETING=hi",
                      "AFMESH_POLL=busy"}));
    EXPECT_EQ(declared_by(module_vars(), AFMESH_MODULE_DEVICE, "bystander"), nullptr)
        << "every variable is the core's or a selected module's: no other module is opened";
    select_both(from({path, "AFMESH_DEVICE=good", "AFMESH_TRANSPORT=good", "AFMESH_TESTMOD_GRETING=hi"}));
    EXPECT_NE(declared_by(module_vars(), AFMESH_MODULE_DEVICE, "bystander"), nullptr)
        << "a name no selected module declares: the others are queried to tell a typo";
}

TEST(loader_settings, BadValueOfAModulesSettingIsTheChecksError) {
    Config config = from({"AFMESH_MODULE_PATH=" + test_dir("good"), "AFMESH_TESTMOD_REPEAT=many"});
    std::vector<std::string> notes;
    Status s = check_module_variables(config, &notes);
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
    EXPECT_EQ(s.message(), "AFMESH_TESTMOD_REPEAT='many' is not an integer");
    EXPECT_TRUE(has_note(
        notes, "AFMESH_TESTMOD_REPEAT='many' is not an integer (from AFMESH_TESTMOD_REPEAT); using the default"));
    EXPECT_EQ(config.get_int("AFMESH_TESTMOD_REPEAT"), 1);
}

TEST(loader_settings, ModuleAnsweringAbi1_3LoadsAndDeclaresNothing) {
    Probe p = probe("abi13", "libafmesh_net_older.so");
    ASSERT_TRUE(p.status) << p.status.to_string();
    EXPECT_EQ(p.record.abi_minor, 3u);
    EXPECT_EQ(declared_by(module_vars(), AFMESH_MODULE_TRANSPORT, "older"), nullptr)
        << "the settings fields are not a 1.3 module's to fill: the core must not read them";
    EXPECT_TRUE(contains(p.record.details, "second line of its account")) << "its 1.1 describe() still works";
}

TEST(loader_settings, ModuleDeclaringACoreSettingIsRefused) {
    Probe p = probe("badset", "libafmesh_net_badsetting.so");
    EXPECT_EQ(p.status.code(), Code::kError);
    EXPECT_EQ(p.record.state, ModuleState::kError);
    EXPECT_TRUE(contains(p.record.reason, "AFMESH_POLL is a core setting")) << p.record.reason;
    EXPECT_EQ(p.module, nullptr);
}

// The project's own transports declare what only they read.
TEST(loader_settings, BuildTreeTransportsDeclareTheirOwnSettings) {
    const std::pair<const char *, std::vector<std::string>> expected[] = {
        {"tcp", {"AFMESH_TCP_BIND"}},
        {"fabric", {"AFMESH_FABRIC_PROVIDER", "AFMESH_FABRIC_ENDPOINTS"}},
        {"ibverbs", {"AFMESH_IBVERBS_LIBRARY"}}};
    int checked = 0;
    for (const auto &[name, settings] : expected) {
        const std::string path = std::string(AFMESH_BUILD_MODULE_DIR) + "/libafmesh_net_" + name + ".so";
        if (!exists(path)) continue;
        SCOPED_TRACE(name);
        ++checked;
        // Queried by the check (the variable names a setting nobody declared yet); never initialised.
        Config config =
            from({"AFMESH_MODULE_PATH=" + std::string(AFMESH_BUILD_MODULE_DIR), "AFMESH_NOT_DECLARED_BY_ANY=1"});
        std::vector<std::string> notes;
        ASSERT_TRUE(check_module_variables(config, &notes));
        const std::vector<ModuleVars> all = module_vars();
        const ModuleVars *declared = declared_by(all, AFMESH_MODULE_TRANSPORT, name);
        ASSERT_NE(declared, nullptr);
        std::vector<std::string> names;
        for (const VarSpec *spec : declared->vars) names.push_back(spec->name);
        EXPECT_EQ(names, settings);
    }
    if (checked == 0) GTEST_SKIP() << "no transport module is built yet";
    // The defaults the core table held before, now written only in the modules.
    for (const auto &[name, default_value] :
         {std::pair{"AFMESH_TCP_BIND", "127.0.0.1"}, {"AFMESH_FABRIC_ENDPOINTS", "auto"}}) {
        if (const VarSpec *spec = find_module_var(name)) {
            EXPECT_STREQ(spec->default_value, default_value) << name;
        }
    }
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

// ---- what rides eagerly: the transport's measured size, or the user's ----

TEST(eager_policy, TheTransportsEagerSizeIsUsedCappedAtItsLargestMessage) {
    Probe p = probe("good", "libafmesh_net_good.so");
    ASSERT_TRUE(p.status) << p.status.to_string();
    const EagerPolicy eager = eager_policy(Config{}, *p.module);
    EXPECT_EQ(eager.source, EagerPolicy::Source::kTransport);
    EXPECT_EQ(p.module->eager_send_size(), 4096u) << "the module says 8192; its max_send_size is 4096";
    EXPECT_TRUE(eager.admits(100, 3996));
    EXPECT_FALSE(eager.admits(100, 3997)) << "the whole message counts, header included";
}

TEST(eager_policy, TheSettingOverridesTheTransportWithinItsMessageLimit) {
    Probe p = probe("good", "libafmesh_net_good.so");
    ASSERT_TRUE(p.status) << p.status.to_string();
    Config config;
    ASSERT_TRUE(config.set("AFMESH_EAGER_BYTES", "64"));
    EagerPolicy eager = eager_policy(config, *p.module);
    EXPECT_EQ(eager.source, EagerPolicy::Source::kSetting);
    EXPECT_TRUE(eager.admits(100, 64));
    EXPECT_FALSE(eager.admits(100, 65));
    ASSERT_TRUE(config.set("AFMESH_EAGER_BYTES", "1000000"));
    eager = eager_policy(config, *p.module);
    EXPECT_TRUE(eager.admits(96, 4000));
    EXPECT_FALSE(eager.admits(97, 4000)) << "no setting makes a message larger than the transport takes";
    ASSERT_TRUE(config.set("AFMESH_EAGER_BYTES", "0"));
    EXPECT_FALSE(eager_policy(config, *p.module).admits(50, 1)) << "0: never";
}

TEST(eager_policy, AModuleBeforeAbi1_5GetsTheSettingsDefault) {
    Probe p = probe("abi13", "libafmesh_net_older.so");
    ASSERT_TRUE(p.status) << p.status.to_string();
    EXPECT_EQ(p.module->eager_send_size(), 0u) << "the field is not a 1.3 module's to fill: the core must not read it";
    const EagerPolicy eager = eager_policy(Config{}, *p.module);
    EXPECT_EQ(eager.source, EagerPolicy::Source::kDefault);
    EXPECT_EQ(eager.max_bytes, 4096u);
    EXPECT_EQ(eager.max_message, 4096u) << "its max_send_size";
}

}  // namespace
}  // namespace afmesh
