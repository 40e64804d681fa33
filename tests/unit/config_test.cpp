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

bool has_note_containing(const Config &config, std::string_view text) {
    for (const std::string &note : config.notes())
        if (note.find(text) != std::string::npos) return true;
    return false;
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
         {"AFMESH_DEVICE", "AFMESH_TRANSPORT", "AFMESH_MODULE_PATH", "AFMESH_NET_DEVICES", "AFMESH_FABRIC_PROVIDER",
          "AFMESH_SCHEDULER", "AFMESH_ROLE", "AFMESH_NUM_WORKERS", "AFMESH_NUM_SERVERS", "AFMESH_RANK",
          "AFMESH_POLL", "AFMESH_CPU_CORES", "AFMESH_AUTH_TOKEN", "AFMESH_LOG_LEVEL"})
        EXPECT_NE(find_var(name), nullptr) << name;
    EXPECT_EQ(find_var("AFMESH_NOPE"), nullptr);
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

TEST(config_env, UnknownAfmeshNameIsANoteWithDidYouMean) {
    Config config = from({"AFMESH_TRANPORT=tcp", "AFMESH_ZZZZZZZZZZZZZZZZZZZZ=1"});
    EXPECT_TRUE(has_note_containing(config, "unknown variable AFMESH_TRANPORT is ignored (did you mean AFMESH_TRANSPORT?)"));
    EXPECT_TRUE(has_note_containing(config, "unknown variable AFMESH_ZZZZZZZZZZZZZZZZZZZZ is ignored"));
    EXPECT_FALSE(has_note_containing(config, "AFMESH_ZZZZZZZZZZZZZZZZZZZZ is ignored (did you mean"));
    EXPECT_FALSE(config.is_set("AFMESH_TRANSPORT")) << "a misspelt name sets nothing";
    EXPECT_TRUE(config.env_error()) << "an unknown name is a warning, not an error";
}

TEST(config_env, PythonBindingVariableIsNotReportedAsUnknown) {
    Config config = from({"AFMESH_LIBRARY=/opt/afmesh/lib/libafmesh.so"});
    EXPECT_TRUE(config.notes().empty());
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
