// SPDX-License-Identifier: Apache-2.0
// The configuration table, value validation, environment parsing and the
// StepMesh/ps-lite aliases. Every environment here is a test-built block.
#include <gtest/gtest.h>

#include <set>

#include "config.h"
#include "env_block.h"

namespace afmesh {
namespace {

using test::EnvBlock;

Config from(EnvBlock env) { return Config::from_env(env.envp()); }

bool has_note_containing(const std::vector<std::string> &notes, std::string_view text) {
    for (const std::string &note : notes)
        if (note.find(text) != std::string::npos) return true;
    return false;
}

bool has_note_containing(const Config &config, std::string_view text) {
    return has_note_containing(config.notes(), text);
}

// What Config::check_module_vars says of `config`'s variables outside the core's table.
struct ModuleCheck {
    Status status;
    std::vector<std::string> notes;
};

ModuleCheck check_module_vars(const Config &config) {
    ModuleCheck check;
    check.status = config.check_module_vars(&check.notes);
    return check;
}

// ---- the table ----

TEST(config_table, EveryRowIsWellFormed) {
    std::set<std::string> names;
    for (const VarSpec &spec : config_vars()) {
        SCOPED_TRACE(spec.name);
        EXPECT_EQ(std::string_view(spec.name).substr(0, 7), "AFMESH_");
        EXPECT_TRUE(names.insert(spec.name).second) << "listed twice";
        EXPECT_NE(std::string_view(spec.doc), "");
        EXPECT_EQ(spec.type == VarType::kEnum, spec.choices != nullptr);
        EXPECT_EQ(find_var(spec.name), &spec);
    }
}

TEST(config_table, EveryNonEmptyDefaultPassesItsOwnValidation) {
    for (const VarSpec &spec : config_vars()) {
        if (spec.default_value[0] == '\0') continue;
        Config config;
        EXPECT_TRUE(config.set(spec.name, spec.default_value)) << spec.name << "=" << spec.default_value;
    }
}

TEST(config_table, ContainsTheDesignedVariables) {
    for (const char *name :
         {"AFMESH_DEVICE", "AFMESH_TRANSPORT", "AFMESH_MODULE_PATH", "AFMESH_NET_DEVICES", "AFMESH_SCHEDULER",
          "AFMESH_ROLE", "AFMESH_NUM_WORKERS", "AFMESH_NUM_SERVERS", "AFMESH_RANK", "AFMESH_POLL",
          "AFMESH_CPU_CORES", "AFMESH_AUTH_TOKEN", "AFMESH_LOG_LEVEL", "AFMESH_CONNECT_TIMEOUT_MS",
          "AFMESH_SYSFS_ROOT"})
        EXPECT_NE(find_var(name), nullptr) << name;
    EXPECT_EQ(find_var("AFMESH_NOPE"), nullptr);
}

// Settings only one module reads are that module's to declare (ABI 1.4), with their defaults.
TEST(config_table, HoldsNoSettingOnlyAModuleReads) {
    for (const char *name :
         {"AFMESH_TCP_BIND", "AFMESH_FABRIC_PROVIDER", "AFMESH_FABRIC_ENDPOINTS", "AFMESH_IBVERBS_LIBRARY"})
        EXPECT_EQ(find_var(name), nullptr) << name;
}

TEST(config_table, SuggestsTheClosestNameOnlyWhenClose) {
    EXPECT_EQ(suggest_var("AFMESH_TRANPORT"), "AFMESH_TRANSPORT");
    EXPECT_EQ(suggest_var("AFMESH_NUM_WORKER"), "AFMESH_NUM_WORKERS");
    EXPECT_EQ(suggest_var("AFMESH_LOGLEVEL"), "AFMESH_LOG_LEVEL");
    EXPECT_EQ(suggest_var("AFMESH_COMPLETELY_DIFFERENT_THING"), "");
}

// ---- values ----

TEST(config_values, UnsetVariablesReadTheirDefaults) {
    Config config;
    EXPECT_FALSE(config.is_set("AFMESH_POLL"));
    EXPECT_EQ(config.get("AFMESH_POLL"), "adaptive");
    EXPECT_EQ(config.get_int("AFMESH_RANK"), -1);
    EXPECT_EQ(config.get_list("AFMESH_DEVICE"), std::vector<std::string>{"auto"});
    EXPECT_STREQ(config.c_str("AFMESH_LOG_LEVEL"), "warn");
    EXPECT_EQ(config.c_str("AFMESH_SCHEDULER"), nullptr) << "an empty default reads as unset";
}

TEST(config_values, SetValuesAreReadBack) {
    Config config;
    ASSERT_TRUE(config.set("AFMESH_SCHEDULER", "10.0.0.1:9000"));
    EXPECT_TRUE(config.is_set("AFMESH_SCHEDULER"));
    EXPECT_STREQ(config.c_str("AFMESH_SCHEDULER"), "10.0.0.1:9000");
    ASSERT_TRUE(config.set("AFMESH_NUM_SERVERS", "8"));
    EXPECT_EQ(config.get_int("AFMESH_NUM_SERVERS"), 8);
}

TEST(config_values, IntegersAreCheckedAgainstInclusiveBounds) {
    Config config;
    EXPECT_TRUE(config.set("AFMESH_RANK", "-1"));
    EXPECT_TRUE(config.set("AFMESH_RANK", std::to_string(1 << 20)));
    EXPECT_EQ(config.get_int("AFMESH_RANK"), 1 << 20);
    Status below = config.set("AFMESH_RANK", "-2");
    EXPECT_EQ(below.code(), Code::kInvalidArgument);
    EXPECT_NE(below.message().find("outside [-1, 1048576]"), std::string::npos) << below.message();
    EXPECT_FALSE(config.set("AFMESH_RANK", std::to_string((1 << 20) + 1)));
    EXPECT_FALSE(config.set("AFMESH_GROUP_SIZE", "0"));
    EXPECT_EQ(config.get_int("AFMESH_RANK"), 1 << 20) << "a rejected value leaves the old one";
}

TEST(config_values, IntegersMustBeWholeDecimalNumbers) {
    Config config;
    for (const char *bad : {"", "12x", "x12", "1.5", " 3", "99999999999999999999"}) {
        Status s = config.set("AFMESH_NUM_WORKERS", bad);
        EXPECT_EQ(s.code(), Code::kInvalidArgument) << "'" << bad << "'";
    }
    EXPECT_NE(config.set("AFMESH_NUM_WORKERS", "12x").message().find("not an integer"), std::string::npos);
    EXPECT_FALSE(config.is_set("AFMESH_NUM_WORKERS"));
}

TEST(config_values, EnumsAcceptExactlyTheirChoices) {
    Config config;
    for (const char *mode : {"busy", "adaptive", "blocking"}) EXPECT_TRUE(config.set("AFMESH_POLL", mode)) << mode;
    Status s = config.set("AFMESH_POLL", "fast");
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
    EXPECT_NE(s.message().find("busy|adaptive|blocking"), std::string::npos) << s.message();
    EXPECT_FALSE(config.set("AFMESH_POLL", "Busy")) << "choices are case-sensitive";
    EXPECT_FALSE(config.set("AFMESH_POLL", "")) << "an enum has no empty choice";
    EXPECT_FALSE(config.set("AFMESH_ROLE", "workerx")) << "a prefix of a longer word is not a choice";
    EXPECT_FALSE(config.set("AFMESH_ROLE", "work")) << "nor is a prefix of a choice";
    EXPECT_EQ(config.get("AFMESH_POLL"), "blocking");
}

TEST(config_values, ListsSplitOnCommasAndDropEmptyItems) {
    Config config;
    ASSERT_TRUE(config.set("AFMESH_DEVICE", " cuda, ,cpu,"));
    EXPECT_EQ(config.get_list("AFMESH_DEVICE"), (std::vector<std::string>{"cuda", "cpu"}));
    ASSERT_TRUE(config.set("AFMESH_CPU_CORES", ""));
    EXPECT_TRUE(config.get_list("AFMESH_CPU_CORES").empty());
    ASSERT_TRUE(config.set("AFMESH_NET_DEVICES", "mlx5_0:1"));
    EXPECT_EQ(config.get_list("AFMESH_NET_DEVICES"), std::vector<std::string>{"mlx5_0:1"});
}

TEST(config_values, SettingAnUnknownNameFailsWithASuggestion) {
    Config config;
    Status s = config.set("AFMESH_TRANPORT", "tcp");
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
    EXPECT_NE(s.message().find("did you mean AFMESH_TRANSPORT"), std::string::npos) << s.message();
}

// ---- the environment ----

TEST(config_env, ReadsAfmeshVariablesAndIgnoresOthers) {
    Config config = from({"AFMESH_TRANSPORT=tcp", "AFMESH_NUM_WORKERS=4", "PATH=/bin", "HOME=/x"});
    EXPECT_EQ(config.get("AFMESH_TRANSPORT"), "tcp");
    EXPECT_EQ(config.get_int("AFMESH_NUM_WORKERS"), 4);
    EXPECT_TRUE(config.notes().empty());
    EXPECT_TRUE(config.env_error());
}

TEST(config_env, EmptyAndNullEnvironmentsGiveDefaults) {
    Config config = Config::from_env(nullptr);
    EXPECT_FALSE(config.is_set("AFMESH_DEVICE"));
    EXPECT_TRUE(config.notes().empty());
}

TEST(config_env, ValuesMayContainEqualsSigns) {
    Config config = from({"AFMESH_AUTH_TOKEN=a=b=c"});
    EXPECT_EQ(config.get("AFMESH_AUTH_TOKEN"), "a=b=c");
}

// Whether a name outside the core's table is a module's is known only once the
// modules are queried (the loader's check_module_variables): until then it
// is kept, and reading the environment says nothing of it.
TEST(config_env, UnknownAfmeshNameIsANoteWithDidYouMean) {
    Config config = from({"AFMESH_TRANPORT=tcp", "AFMESH_ZZZZZZZZZZZZZZZZZZZZ=1"});
    EXPECT_TRUE(config.notes().empty()) << config.notes().front();
    EXPECT_EQ(config.module_var_names(), (std::vector<std::string>{"AFMESH_TRANPORT", "AFMESH_ZZZZZZZZZZZZZZZZZZZZ"}));
    ModuleCheck check = check_module_vars(config);
    EXPECT_TRUE(has_note_containing(check.notes,
                                    "unknown variable AFMESH_TRANPORT is ignored (did you mean AFMESH_TRANSPORT?)"));
    EXPECT_TRUE(has_note_containing(check.notes, "unknown variable AFMESH_ZZZZZZZZZZZZZZZZZZZZ is ignored"));
    EXPECT_FALSE(has_note_containing(check.notes, "AFMESH_ZZZZZZZZZZZZZZZZZZZZ is ignored (did you mean"));
    EXPECT_FALSE(config.is_set("AFMESH_TRANSPORT")) << "a misspelt name sets nothing";
    EXPECT_FALSE(config.is_set("AFMESH_TRANPORT")) << "nor does a name nobody declares";
    EXPECT_EQ(config.get("AFMESH_TRANPORT"), "");
    EXPECT_TRUE(config.env_error()) << "an unknown name is a warning, not an error";
    EXPECT_TRUE(check.status) << "an unknown name is a warning, not an error";
}

TEST(config_env, PythonBindingVariableIsNotReportedAsUnknown) {
    Config config = from({"AFMESH_LIBRARY=/opt/afmesh/lib/libafmesh.so"});
    EXPECT_TRUE(config.notes().empty());
    EXPECT_TRUE(config.module_var_names().empty());
    EXPECT_TRUE(check_module_vars(config).notes.empty());
}

TEST(config_env, InvalidValueIsAnErrorAndKeepsTheDefault) {
    Config config = from({"AFMESH_POLL=fast"});
    EXPECT_EQ(config.env_error().code(), Code::kInvalidArgument);
    EXPECT_NE(config.env_error().message().find("AFMESH_POLL='fast'"), std::string::npos);
    EXPECT_TRUE(has_note_containing(config, "AFMESH_POLL='fast' is not one of busy|adaptive|blocking"));
    EXPECT_FALSE(config.is_set("AFMESH_POLL"));
    EXPECT_EQ(config.get("AFMESH_POLL"), "adaptive");
}

TEST(config_env, ErrorDoesNotDependOnTheEnvironmentsOrder) {
    Config one = from({"AFMESH_POLL=fast", "AFMESH_NUM_WORKERS=many"});
    Config other = from({"AFMESH_NUM_WORKERS=many", "AFMESH_POLL=fast"});
    EXPECT_EQ(one.env_error().message(), other.env_error().message());
    EXPECT_TRUE(has_note_containing(one, "AFMESH_POLL='fast'"));
    EXPECT_TRUE(has_note_containing(one, "AFMESH_NUM_WORKERS='many'"));
}

// ---- settings a module declares (ABI 1.4) ----
// The declarations are process-wide: each test declares names and modules of its own.

VarSpec string_var(const char *name, const char *default_value = "") {
    return {name, VarType::kString, default_value, nullptr, 0, 0, "a test module's string"};
}

const ModuleVars *declared_by(const std::vector<ModuleVars> &all, const std::string &module) {
    for (const ModuleVars &m : all)
        if (m.module == module) return &m;
    return nullptr;
}

TEST(config_module_vars, DeclaredSettingsAreKnownWithTheirDefaultsAndOrder) {
    const VarSpec rows[] = {
        {"AFMESH_CT_DECL_COUNT", VarType::kInt, "4", nullptr, 1, 8, "how many"},
        {"AFMESH_CT_DECL_MODE", VarType::kEnum, "fast", "fast|safe", 0, 0, "which way"},
        {"AFMESH_CT_DECL_ON", VarType::kBool, "", nullptr, 0, 0, "whether"},
    };
    ASSERT_TRUE(declare_module_vars(AFMESH_MODULE_TRANSPORT, "ct_decl", rows));
    const std::vector<ModuleVars> all = module_vars();
    const ModuleVars *declared = declared_by(all, "ct_decl");
    ASSERT_NE(declared, nullptr);
    EXPECT_EQ(declared->kind, AFMESH_MODULE_TRANSPORT);
    ASSERT_EQ(declared->vars.size(), 3u);
    EXPECT_STREQ(declared->vars[0]->name, "AFMESH_CT_DECL_COUNT");
    EXPECT_STREQ(declared->vars[1]->choices, "fast|safe");
    EXPECT_EQ(declared->vars[2]->type, VarType::kBool);
    EXPECT_EQ(find_module_var("AFMESH_CT_DECL_MODE"), declared->vars[1]);
    EXPECT_EQ(find_var("AFMESH_CT_DECL_MODE"), nullptr) << "the core's table stays the core's";

    Config unset;
    EXPECT_FALSE(unset.is_set("AFMESH_CT_DECL_COUNT"));
    EXPECT_EQ(unset.get_int("AFMESH_CT_DECL_COUNT"), 4);
    EXPECT_STREQ(unset.c_str("AFMESH_CT_DECL_MODE"), "fast");
    EXPECT_EQ(unset.c_str("AFMESH_CT_DECL_ON"), nullptr) << "an empty default reads as unset";
    EXPECT_EQ(suggest_var("AFMESH_CT_DECL_MODDE"), "AFMESH_CT_DECL_MODE") << "typos of it get a did-you-mean";
}

TEST(config_module_vars, EnvironmentValuesAreCheckedAgainstTheDeclaredType) {
    const VarSpec rows[] = {
        {"AFMESH_CT_ENV_COUNT", VarType::kInt, "4", nullptr, 1, 8, "how many"},
        {"AFMESH_CT_ENV_MODE", VarType::kEnum, "fast", "fast|safe", 0, 0, "which way"},
        {"AFMESH_CT_ENV_ON", VarType::kBool, "0", nullptr, 0, 0, "whether"},
    };
    ASSERT_TRUE(declare_module_vars(AFMESH_MODULE_DEVICE, "ct_env", rows));
    Config good = from({"AFMESH_CT_ENV_COUNT=8", "AFMESH_CT_ENV_MODE=safe", "AFMESH_CT_ENV_ON=1"});
    EXPECT_TRUE(good.is_set("AFMESH_CT_ENV_COUNT"));
    EXPECT_EQ(good.get_int("AFMESH_CT_ENV_COUNT"), 8);
    EXPECT_EQ(good.get("AFMESH_CT_ENV_MODE"), "safe");
    EXPECT_STREQ(good.c_str("AFMESH_CT_ENV_ON"), "1");
    ModuleCheck fine = check_module_vars(good);
    EXPECT_TRUE(fine.status);
    EXPECT_TRUE(fine.notes.empty()) << fine.notes.front();

    Config bad = from({"AFMESH_CT_ENV_COUNT=9", "AFMESH_CT_ENV_MODE=Fast", "AFMESH_CT_ENV_ON=yes"});
    ModuleCheck refused = check_module_vars(bad);
    EXPECT_EQ(refused.status.code(), Code::kInvalidArgument);
    EXPECT_EQ(refused.status.message(), "AFMESH_CT_ENV_COUNT=9 is outside [1, 8]") << "the first by name";
    EXPECT_TRUE(has_note_containing(
        refused.notes, "AFMESH_CT_ENV_COUNT=9 is outside [1, 8] (from AFMESH_CT_ENV_COUNT); using the default"));
    EXPECT_TRUE(has_note_containing(refused.notes, "AFMESH_CT_ENV_MODE='Fast' is not one of fast|safe"));
    EXPECT_TRUE(has_note_containing(refused.notes, "AFMESH_CT_ENV_ON='yes' is not 0 or 1"));
    EXPECT_FALSE(bad.is_set("AFMESH_CT_ENV_COUNT")) << "a refused value is no value";
    EXPECT_EQ(bad.get_int("AFMESH_CT_ENV_COUNT"), 4);
    EXPECT_STREQ(bad.c_str("AFMESH_CT_ENV_MODE"), "fast");
    EXPECT_EQ(bad.get("AFMESH_CT_ENV_ON"), "0");
}

TEST(config_module_vars, SetAcceptsADeclaredSettingAndChecksItsValue) {
    const VarSpec rows[] = {{"AFMESH_CT_SET_COUNT", VarType::kInt, "", nullptr, 0, 3, "how many"}};
    Config config;
    EXPECT_FALSE(config.set("AFMESH_CT_SET_COUNT", "2")) << "unknown before a module declares it";
    ASSERT_TRUE(declare_module_vars(AFMESH_MODULE_DEVICE, "ct_set", rows));
    EXPECT_TRUE(config.set("AFMESH_CT_SET_COUNT", "2"));
    EXPECT_EQ(config.get_int("AFMESH_CT_SET_COUNT"), 2);
    Status s = config.set("AFMESH_CT_SET_COUNT", "4");
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
    EXPECT_NE(s.message().find("outside [0, 3]"), std::string::npos) << s.message();
    EXPECT_EQ(config.get_int("AFMESH_CT_SET_COUNT"), 2) << "a rejected value leaves the old one";
}

TEST(config_module_vars, MalformedDeclarationsAreRefusedAsAWhole) {
    const std::pair<VarSpec, const char *> bad[] = {
        {string_var("AFMESH_POLL"), "AFMESH_POLL is a core setting"},
        {string_var("MYMOD_THING"), "is not AFMESH_ followed by"},
        {string_var("AFMESH_ct_lower"), "is not AFMESH_ followed by"},
        {string_var(nullptr), "is not AFMESH_ followed by"},
        {{"AFMESH_CT_BAD_DOC", VarType::kString, "", nullptr, 0, 0, ""}, "has no doc line"},
        {{"AFMESH_CT_BAD_ENUM", VarType::kEnum, "", nullptr, 0, 0, "x"}, "is an enum without choices"},
        {{"AFMESH_CT_BAD_BOUNDS", VarType::kInt, "", nullptr, 5, 1, "x"}, "has its bounds reversed"},
        {{"AFMESH_CT_BAD_DEFAULT", VarType::kInt, "9", nullptr, 0, 3, "x"}, "its own default fails"},
        {{"AFMESH_CT_BAD_BOOL", VarType::kBool, "true", nullptr, 0, 0, "x"}, "is not 0 or 1"},
    };
    for (const auto &[row, why] : bad) {
        SCOPED_TRACE(why);
        const VarSpec rows[] = {string_var("AFMESH_CT_BAD_FINE"), row};
        Status s = declare_module_vars(AFMESH_MODULE_DEVICE, "ct_bad", rows);
        EXPECT_EQ(s.code(), Code::kInvalidArgument);
        EXPECT_NE(s.message().find("module ct_bad declares a bad setting"), std::string::npos) << s.message();
        EXPECT_NE(s.message().find(why), std::string::npos) << s.message();
    }
    const VarSpec twice[] = {string_var("AFMESH_CT_BAD_TWICE"), string_var("AFMESH_CT_BAD_TWICE")};
    EXPECT_NE(declare_module_vars(AFMESH_MODULE_DEVICE, "ct_bad", twice).message().find("listed twice"),
              std::string::npos);
    EXPECT_EQ(find_module_var("AFMESH_CT_BAD_FINE"), nullptr) << "nothing of a refused table is kept";
    EXPECT_EQ(declared_by(module_vars(), "ct_bad"), nullptr);
}

TEST(config_module_vars, ModulesMayShareANameOnlyWhenTheyDeclareItAlike) {
    ASSERT_TRUE(
        declare_module_vars(AFMESH_MODULE_DEVICE, "ct_share_a", std::vector{string_var("AFMESH_CT_SHARED", "x")}));
    ASSERT_TRUE(
        declare_module_vars(AFMESH_MODULE_TRANSPORT, "ct_share_b", std::vector{string_var("AFMESH_CT_SHARED", "x")}));
    const std::vector<ModuleVars> all = module_vars();
    ASSERT_NE(declared_by(all, "ct_share_b"), nullptr);
    EXPECT_EQ(declared_by(all, "ct_share_b")->vars[0], declared_by(all, "ct_share_a")->vars[0]) << "one row, shared";
    Status other =
        declare_module_vars(AFMESH_MODULE_TRANSPORT, "ct_share_c", std::vector{string_var("AFMESH_CT_SHARED", "y")});
    EXPECT_EQ(other.code(), Code::kInvalidArgument);
    EXPECT_NE(other.message().find("AFMESH_CT_SHARED is declared otherwise by module ct_share_a"), std::string::npos)
        << other.message();
}

TEST(config_module_vars, DeclaringAgainKeepsTheFirstDeclaration) {
    ASSERT_TRUE(
        declare_module_vars(AFMESH_MODULE_DEVICE, "ct_again", std::vector{string_var("AFMESH_CT_AGAIN", "one")}));
    const VarSpec *first = find_module_var("AFMESH_CT_AGAIN");
    ASSERT_TRUE(
        declare_module_vars(AFMESH_MODULE_DEVICE, "ct_again", std::vector{string_var("AFMESH_CT_AGAIN", "two")}));
    EXPECT_EQ(find_module_var("AFMESH_CT_AGAIN"), first) << "pointers handed out stay valid";
    EXPECT_STREQ(first->default_value, "one");
}

TEST(config_module_vars, DidYouMeanCoversTheModulesSettings) {
    ASSERT_TRUE(
        declare_module_vars(AFMESH_MODULE_TRANSPORT, "ct_typo", std::vector{string_var("AFMESH_CT_TYPO_GREETING")}));
    Config config = from({"AFMESH_CT_TYPO_GRETING=hi", "AFMESH_CT_TYPO_GREETING=hello"});
    ModuleCheck check = check_module_vars(config);
    EXPECT_TRUE(check.status);
    ASSERT_EQ(check.notes.size(), 1u) << "the declared one is no typo";
    EXPECT_EQ(check.notes[0],
              "unknown variable AFMESH_CT_TYPO_GRETING is ignored (did you mean AFMESH_CT_TYPO_GREETING?)");
    EXPECT_EQ(config.get("AFMESH_CT_TYPO_GREETING"), "hello");
}

// ---- StepMesh / ps-lite aliases ----

struct AliasCase {
    const char *alias_entry;
    const char *target;
    const char *expected;
};

class config_aliases : public ::testing::TestWithParam<AliasCase> {};

TEST_P(config_aliases, MapsToItsAfmeshVariableWithANote) {
    const AliasCase &c = GetParam();
    Config config = from({c.alias_entry});
    EXPECT_TRUE(config.is_set(c.target));
    EXPECT_EQ(config.get(c.target), c.expected);
    std::string alias(c.alias_entry, strchr(c.alias_entry, '='));
    EXPECT_TRUE(has_note_containing(config, "using " + alias + " as " + c.target));
    EXPECT_TRUE(config.env_error());
}

INSTANTIATE_TEST_SUITE_P(StepMesh, config_aliases,
                         ::testing::Values(AliasCase{"DMLC_ROLE=worker", "AFMESH_ROLE", "worker"},
                                           AliasCase{"DMLC_NUM_WORKER=3", "AFMESH_NUM_WORKERS", "3"},
                                           AliasCase{"DMLC_NUM_SERVER=5", "AFMESH_NUM_SERVERS", "5"},
                                           AliasCase{"DMLC_NODE_RANK=2", "AFMESH_RANK", "2"},
                                           AliasCase{"DMLC_GROUP_SIZE=4", "AFMESH_GROUP_SIZE", "4"},
                                           AliasCase{"STEPMESH_GPU=7", "AFMESH_DEVICE_ID", "7"},
                                           AliasCase{"STEPMESH_BACKEND=GPU", "AFMESH_DEVICE", "cuda"},
                                           AliasCase{"STEPMESH_BACKEND=gpu", "AFMESH_DEVICE", "cuda"},
                                           AliasCase{"STEPMESH_BACKEND=CPU", "AFMESH_DEVICE", "cpu"},
                                           AliasCase{"STEPMESH_BAKCEND=GPU", "AFMESH_DEVICE", "cuda"}));

TEST(config_alias_rules, EveryAliasTakenIsNamedInOneNote) {
    // A StepMesh launch script's environment: one warning line for all of it, not one per name.
    Config config = from({"DMLC_ROLE=worker", "DMLC_NUM_WORKER=2", "DMLC_NUM_SERVER=2", "DMLC_NODE_RANK=1",
                          "STEPMESH_GPU=0", "DMLC_PS_ROOT_URI=10.1.2.3", "DMLC_PS_ROOT_PORT=8123"});
    ASSERT_EQ(config.notes().size(), 1u);
    EXPECT_EQ(config.notes()[0],
              "using DMLC_ROLE as AFMESH_ROLE, DMLC_NUM_WORKER as AFMESH_NUM_WORKERS, DMLC_NUM_SERVER as "
              "AFMESH_NUM_SERVERS, DMLC_NODE_RANK as AFMESH_RANK, STEPMESH_GPU as AFMESH_DEVICE_ID, DMLC_PS_ROOT_URI "
              "and DMLC_PS_ROOT_PORT as AFMESH_SCHEDULER (StepMesh names)");
}

TEST(config_alias_rules, AfmeshNameWinsOverItsAliasWithANote) {
    Config config = from({"AFMESH_ROLE=server", "DMLC_ROLE=worker"});
    EXPECT_EQ(config.get("AFMESH_ROLE"), "server");
    EXPECT_TRUE(has_note_containing(config, "DMLC_ROLE=worker is ignored: AFMESH_ROLE is set and wins"));
}

TEST(config_alias_rules, AgreeingAliasNeedsNoNote) {
    Config config = from({"AFMESH_NUM_SERVERS=2", "DMLC_NUM_SERVER=2"});
    EXPECT_EQ(config.get_int("AFMESH_NUM_SERVERS"), 2);
    EXPECT_TRUE(config.notes().empty());
}

TEST(config_alias_rules, AliasValuesAreValidatedLikeTheirTarget) {
    Config config = from({"DMLC_ROLE=parameter-server"});
    EXPECT_EQ(config.env_error().code(), Code::kInvalidArgument);
    EXPECT_TRUE(has_note_containing(config, "(from DMLC_ROLE)"));
    EXPECT_FALSE(config.is_set("AFMESH_ROLE"));
}

TEST(config_alias_rules, PsRootUriAndPortBecomeTheScheduler) {
    Config config = from({"DMLC_PS_ROOT_URI=10.1.2.3", "DMLC_PS_ROOT_PORT=8123"});
    EXPECT_EQ(config.get("AFMESH_SCHEDULER"), "10.1.2.3:8123");
    EXPECT_TRUE(has_note_containing(config, "using DMLC_PS_ROOT_URI and DMLC_PS_ROOT_PORT as AFMESH_SCHEDULER"));
}

TEST(config_alias_rules, PsRootIpv6UriIsBracketed) {
    Config config = from({"DMLC_PS_ROOT_URI=fd00::1", "DMLC_PS_ROOT_PORT=8123"});
    EXPECT_EQ(config.get("AFMESH_SCHEDULER"), "[fd00::1]:8123");
}

TEST(config_alias_rules, PsRootBracketedIpv6UriIsKeptAsItIs) {
    Config config = from({"DMLC_PS_ROOT_URI=[fd00::1]", "DMLC_PS_ROOT_PORT=8123"});
    EXPECT_EQ(config.get("AFMESH_SCHEDULER"), "[fd00::1]:8123");
}

TEST(config_alias_rules, PsRootUriAloneIsIgnoredWithANote) {
    Config config = from({"DMLC_PS_ROOT_URI=10.1.2.3"});
    EXPECT_FALSE(config.is_set("AFMESH_SCHEDULER"));
    EXPECT_TRUE(has_note_containing(config, "must be set together"));
}

TEST(config_alias_rules, AfmeshSchedulerWinsOverPsRootWithANote) {
    Config config = from({"AFMESH_SCHEDULER=sched:1", "DMLC_PS_ROOT_URI=10.1.2.3", "DMLC_PS_ROOT_PORT=8123"});
    EXPECT_EQ(config.get("AFMESH_SCHEDULER"), "sched:1");
    EXPECT_TRUE(has_note_containing(config, "AFMESH_SCHEDULER is set and wins"));
}

}  // namespace
}  // namespace afmesh
