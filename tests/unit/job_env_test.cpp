// SPDX-License-Identifier: Apache-2.0
// A node's place under a job manager (core/job_env.h): each launcher's
// variables, the layouts, the scheduler's address, and how Config adopts
// them (only with AFMESH_LAYOUT, never over AFMESH_ROLE).
#include <gtest/gtest.h>

#include <set>

#include "config.h"
#include "env_block.h"
#include "job_env.h"

namespace afmesh {
namespace {

using test::EnvBlock;

JobPlace detect(const EnvMap &env) {
    std::optional<JobPlace> place;
    Status s = detect_job_place(env, &place);
    EXPECT_TRUE(s.is_ok()) << s.message();
    EXPECT_TRUE(place.has_value());
    return place.value_or(JobPlace{});
}

Status detect_error(const EnvMap &env) {
    std::optional<JobPlace> place;
    return detect_job_place(env, &place);
}

// ---- each launcher ----

TEST(job_place, NoLauncherVariablesIsNoPlace) {
    std::optional<JobPlace> place = JobPlace{};
    EXPECT_TRUE(detect_job_place({{"HOME", "/root"}, {"RANK", "1"}}, &place).is_ok());  // RANK alone is not torchrun
    EXPECT_FALSE(place.has_value());
}

TEST(job_place, Torchrun) {
    JobPlace p = detect({{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "4"},
                         {"MASTER_ADDR", "10.1.2.3"}, {"MASTER_PORT", "29500"}});
    EXPECT_EQ(p.launcher, "torchrun");
    EXPECT_EQ(p.rank, 5);
    EXPECT_EQ(p.size, 8);
    EXPECT_EQ(p.local_rank, 1);
    EXPECT_EQ(p.local_size, 4);
    EXPECT_EQ(p.first_host, "10.1.2.3");
    EXPECT_EQ(p.suggested_port, 29501);  // MASTER_PORT is torch's own store
}

TEST(job_place, OpenMpi) {
    JobPlace p = detect({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                         {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
    EXPECT_EQ(p.launcher, "Open MPI");
    EXPECT_EQ(p.rank, 3);
    EXPECT_EQ(p.local_rank, 1);
    EXPECT_EQ(p.local_size, 2);
    EXPECT_EQ(p.first_host, "");  // two hosts, and Open MPI does not say which runs rank 0
}

TEST(job_place, EveryProcessOnOneHostPutsRankZeroHere) {
    JobPlace p = detect({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}, {"MPI_LOCALRANKID", "1"}, {"MPI_LOCALNRANKS", "2"}});
    EXPECT_EQ(p.launcher, "PMI");
    EXPECT_EQ(p.first_host, "127.0.0.1");
}

TEST(job_place, Slurm) {
    JobPlace p = detect({{"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "0"},
                         {"SLURM_NTASKS_PER_NODE", "2"}, {"SLURM_STEP_NODELIST", "gpu[07-08]"},
                         {"SLURM_JOB_NODELIST", "gpu[01-16]"}, {"SLURM_JOB_ID", "123456"}});
    EXPECT_EQ(p.launcher, "Slurm");
    EXPECT_EQ(p.rank, 2);
    EXPECT_EQ(p.local_size, 2);
    EXPECT_EQ(p.first_host, "gpu07");  // the step's nodes, not the whole allocation's
    EXPECT_EQ(p.suggested_port, 20000 + 123456 % 20000);
}

TEST(job_place, LeaderWorkerSet) {
    JobPlace p = detect({{"LWS_WORKER_INDEX", "0"}, {"LWS_GROUP_SIZE", "3"},
                         {"LWS_LEADER_ADDRESS", "af-0.af.default.svc.cluster.local"}});
    EXPECT_EQ(p.launcher, "LeaderWorkerSet");
    EXPECT_EQ(p.size, 3);
    EXPECT_EQ(p.local_size, 1);
    EXPECT_EQ(p.first_host, "af-0.af.default.svc.cluster.local");
}

// torchrun's workers inherit the variables of the Slurm task or MPI rank that
// ran the torchrun agent; those describe the agent, not them.
TEST(job_place, TorchrunWinsOverTheLauncherThatRanIt) {
    JobPlace p = detect({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"OMPI_COMM_WORLD_RANK", "0"},
                         {"OMPI_COMM_WORLD_SIZE", "2"}, {"RANK", "7"}, {"WORLD_SIZE", "16"}});
    EXPECT_EQ(p.launcher, "torchrun");
    EXPECT_EQ(p.rank, 7);
}

TEST(job_place, MalformedVariablesAreNamed) {
    const std::pair<EnvMap, const char *> cases[] = {
        {{{"RANK", "x"}, {"WORLD_SIZE", "4"}}, "RANK=x"},
        {{{"RANK", "4"}, {"WORLD_SIZE", "4"}}, "RANK=4, past WORLD_SIZE=4"},
        {{{"RANK", "0"}, {"WORLD_SIZE", "0"}}, "WORLD_SIZE=0"},
        {{{"PMI_RANK", "-1"}, {"PMI_SIZE", "2"}}, "PMI_RANK=-1"},
        {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "http"}}, "MASTER_PORT=http"},
    };
    for (const auto &[env, named] : cases) {
        Status s = detect_error(env);
        EXPECT_EQ(s.code(), Code::kInvalidArgument) << named;
        EXPECT_NE(s.message().find(named), std::string::npos) << s.message();
    }
}

// ---- layouts ----

JobPlace place_of(int64_t rank, int64_t size, int64_t local_rank = 0, int64_t local_size = 0) {
    JobPlace p;
    p.launcher = "test";
    p.rank = rank;
    p.size = size;
    p.local_rank = local_rank;
    p.local_size = local_size;
    p.first_host = "10.0.0.1";
    return p;
}

// Every rank of a job of `size` under `layout`: (worker?, rank) each; counts are checked to agree.
std::vector<std::pair<bool, int64_t>> roles_of(std::string_view layout, int64_t size, int64_t per_host = 0) {
    std::vector<std::pair<bool, int64_t>> roles;
    for (int64_t r = 0; r < size; ++r) {
        JobRole role;
        Status s = derive_job_role(place_of(r, size, per_host ? r % per_host : 0, per_host), layout, "", &role);
        EXPECT_TRUE(s.is_ok()) << s.message();
        EXPECT_EQ(role.num_workers + role.num_servers, size);
        roles.emplace_back(role.worker, role.rank);
    }
    return roles;
}

TEST(job_layout, ServersFirst) {
    const std::vector<std::pair<bool, int64_t>> expected = {{false, 0}, {false, 1}, {true, 0}, {true, 1}, {true, 2}};
    EXPECT_EQ(roles_of("servers:2", 5), expected);
}

TEST(job_layout, WorkersFirst) {
    const std::vector<std::pair<bool, int64_t>> expected = {{true, 0}, {false, 0}, {false, 1}};
    EXPECT_EQ(roles_of("workers:1", 3), expected);
}

// Two hosts of four: each host's first three are workers.
TEST(job_layout, WorkersPerHost) {
    const std::vector<std::pair<bool, int64_t>> expected = {{true, 0}, {true, 1}, {true, 2}, {false, 0},
                                                            {true, 3}, {true, 4}, {true, 5}, {false, 1}};
    EXPECT_EQ(roles_of("workers-per-host:3", 8, 4), expected);
    JobRole role;
    ASSERT_TRUE(derive_job_role(place_of(0, 8, 0, 4), "workers-per-host:3", "", &role).is_ok());
    EXPECT_EQ(role.num_workers, 6);
    EXPECT_EQ(role.num_servers, 2);
}

TEST(job_layout, BadLayoutsAreRefusedSayingWhy) {
    const std::tuple<JobPlace, const char *, const char *> cases[] = {
        {place_of(0, 4), "", "set AFMESH_LAYOUT"},
        {place_of(0, 4), "servers:4", "leaves no worker or no server among 4"},
        {place_of(0, 4), "workers:0", "leaves no worker or no server"},
        {place_of(0, 4), "servers:two", "is not servers:S, workers:W or workers-per-host:W"},
        {place_of(0, 4), "ffn:2", "is not servers:S"},
        {place_of(0, 4), "workers-per-host:1", "does not say"},  // no local size
        {place_of(0, 4, 0, 2), "workers-per-host:2", "leaves no worker or no server among 2"},
        {place_of(1, 4, 0, 2), "workers-per-host:1", "placed host by host"},  // round-robin placement
    };
    for (const auto &[place, layout, why] : cases) {
        JobRole role;
        Status s = derive_job_role(place, layout, "", &role);
        EXPECT_EQ(s.code(), Code::kInvalidArgument) << layout;
        EXPECT_NE(s.message().find(why), std::string::npos) << layout << ": " << s.message();
    }
}

// ---- the scheduler ----

TEST(job_scheduler, AtTheFirstHostOnTheSuggestedOrDefaultPort) {
    JobPlace p = place_of(1, 2);
    JobRole role;
    ASSERT_TRUE(derive_job_role(p, "servers:1", "", &role).is_ok());
    EXPECT_EQ(role.scheduler, "10.0.0.1:" + std::to_string(kJobSchedulerPort));
    EXPECT_FALSE(role.runs_scheduler);
    p.suggested_port = 29501;
    p.first_host = "fe80::1";
    ASSERT_TRUE(derive_job_role(p, "servers:1", "", &role).is_ok());
    EXPECT_EQ(role.scheduler, "[fe80::1]:29501");
    ASSERT_TRUE(derive_job_role(place_of(0, 2), "servers:1", "", &role).is_ok());
    EXPECT_TRUE(role.runs_scheduler);
}

TEST(job_scheduler, AfmeshSchedulerWinsAndIsNeededWhereRankZerosHostIsUnknown) {
    JobPlace p = place_of(1, 2);
    p.first_host = "";
    JobRole role;
    Status s = derive_job_role(p, "servers:1", "", &role);
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
    EXPECT_NE(s.message().find("set AFMESH_SCHEDULER"), std::string::npos) << s.message();
    ASSERT_TRUE(derive_job_role(p, "servers:1", "node1:7000", &role).is_ok());
    EXPECT_EQ(role.scheduler, "node1:7000");
}

TEST(job_scheduler, FirstSlurmHostOfAHostList) {
    const std::pair<const char *, const char *> cases[] = {
        {"node1", "node1"},
        {"node1,node2", "node1"},
        {"gpu[07-09,12],cpu1", "gpu07"},
        {"gpu[12,07-09]", "gpu12"},
        {"rack[1-2]-node[3-4]", "rack1-node3"},
        {"", ""},
    };
    for (auto [list, first] : cases) EXPECT_EQ(first_slurm_host(list), first) << list;
}

// ---- Config adopting the place ----

Config from(EnvBlock env) { return Config::from_env(env.envp()); }

TEST(job_config, TheLayoutTakesRoleRankCountsAndSchedulerFromTheLauncher) {
    Config c = from({"RANK=3", "WORLD_SIZE=4", "LOCAL_RANK=3", "LOCAL_WORLD_SIZE=4", "MASTER_ADDR=10.0.0.9",
                     "MASTER_PORT=29500", "AFMESH_LAYOUT=servers:1"});
    ASSERT_TRUE(c.env_error().is_ok()) << c.env_error().message();
    EXPECT_EQ(c.get("AFMESH_ROLE"), "worker");
    EXPECT_EQ(c.get_int("AFMESH_RANK"), 2);
    EXPECT_EQ(c.get_int("AFMESH_NUM_WORKERS"), 3);
    EXPECT_EQ(c.get_int("AFMESH_NUM_SERVERS"), 1);
    EXPECT_EQ(c.get("AFMESH_SCHEDULER"), "10.0.0.9:29501");
    ASSERT_TRUE(c.job_role().has_value());
    EXPECT_FALSE(c.job_role()->runs_scheduler);
    EXPECT_TRUE(c.notes().empty()) << c.notes().front();
}

TEST(job_config, WithoutALayoutTheLauncherIsOnlyReported) {
    Config c = from({"RANK=x", "WORLD_SIZE=4"});  // malformed, but not acted on: RANK may be the program's
    EXPECT_TRUE(c.env_error().is_ok());
    EXPECT_FALSE(c.is_set("AFMESH_ROLE"));
    Config d = from({"RANK=1", "WORLD_SIZE=4"});
    ASSERT_TRUE(d.job_place().has_value());
    EXPECT_EQ(d.job_place()->launcher, "torchrun");
    EXPECT_FALSE(d.job_role().has_value());
}

TEST(job_config, AfmeshRoleWinsOverTheLayout) {
    Config c = from({"RANK=1", "WORLD_SIZE=4", "MASTER_ADDR=h", "AFMESH_LAYOUT=servers:1", "AFMESH_ROLE=server",
                     "AFMESH_RANK=0"});
    EXPECT_TRUE(c.env_error().is_ok());
    EXPECT_EQ(c.get("AFMESH_ROLE"), "server");
    EXPECT_EQ(c.get_int("AFMESH_RANK"), 0);
    EXPECT_FALSE(c.job_role().has_value());
    ASSERT_EQ(c.notes().size(), 1u);
    EXPECT_NE(c.notes()[0].find("AFMESH_LAYOUT is ignored"), std::string::npos) << c.notes()[0];
}

TEST(job_config, ALayoutThatCannotBeAppliedIsAnError) {
    const std::pair<EnvBlock, const char *> cases[] = {
        {{"AFMESH_LAYOUT=servers:1"}, "no job manager's variables"},
        {{"RANK=0", "WORLD_SIZE=1", "AFMESH_LAYOUT=servers:1"}, "leaves no worker"},
        {{"RANK=x", "WORLD_SIZE=2", "AFMESH_LAYOUT=servers:1"}, "RANK=x"},
        {{"RANK=1", "WORLD_SIZE=2", "MASTER_ADDR=h", "AFMESH_LAYOUT=servers:1", "AFMESH_NUM_WORKERS=3"},
         "AFMESH_NUM_WORKERS=3 contradicts AFMESH_LAYOUT under torchrun, which gives 1"},
    };
    for (auto [env, why] : cases) {
        Config c = from(env);
        EXPECT_EQ(c.env_error().code(), Code::kInvalidArgument) << why;
        EXPECT_NE(c.env_error().message().find(why), std::string::npos) << c.env_error().message();
    }
}

}  // namespace
}  // namespace afmesh
