// SPDX-License-Identifier: Apache-2.0
// A node's place when a job manager started it: Open MPI, PMI (MPICH,
// Intel MPI), Slurm, torchrun or a Kubernetes LeaderWorkerSet each tell a
// process its global rank, the job's size and (most of them) where rank 0
// runs, in variables of their own. With a layout saying which global ranks
// are servers, that is enough for AFMESH_ROLE, AFMESH_RANK, the role counts
// and the scheduler's address, so one command line starts the cluster under
// any of them; global rank 0 runs the scheduler besides its own role.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "status.h"

namespace afmesh {

using EnvMap = std::map<std::string, std::string, std::less<>>;

/** Where a job manager placed this process. */
struct JobPlace {
    std::string launcher;        // "torchrun", "Open MPI", "PMI", "Slurm", "LeaderWorkerSet"
    int64_t rank = 0, size = 0;  // among every process of the job
    int64_t local_rank = 0;      // among the job's processes on this host
    int64_t local_size = 0;      // processes on this host; 0 when the launcher does not say
    std::string first_host;      // where global rank 0 runs; "" when the launcher does not say
    int64_t suggested_port = 0;  // a scheduler port the launcher's variables suggest; 0 for none
};

/**
 * The launcher whose variables `env` holds, nullopt (and OK) when none; an
 * INVALID_ARGUMENT naming the variable when one is malformed (a rank past
 * the size, a non-number). torchrun is looked for first: under Slurm or MPI
 * its workers inherit the outer launcher's variables, which describe the
 * torchrun agent rather than them.
 */
Status detect_job_place(const EnvMap &env, std::optional<JobPlace> *out);

/** What this process is in the cluster, derived from its place and the layout. */
struct JobRole {
    bool worker = false;      // else a server
    int64_t rank = 0;         // within its role
    int64_t num_workers = 0, num_servers = 0;
    std::string scheduler;    // host:port every node connects to
    bool runs_scheduler = false;  // global rank 0: the scheduler runs inside it
};

/**
 * Applies `layout` to `place`:
 *   "servers:S"           global ranks 0..S-1 are servers, the rest workers;
 *   "workers:W"           global ranks 0..W-1 are workers, the rest servers;
 *   "workers-per-host:W"  on each host the first W local ranks are workers,
 *                         the rest servers (ranks placed host by host).
 * `scheduler` (AFMESH_SCHEDULER, may be empty) names the scheduler; else it
 * is the first host at the launcher's suggested port or kJobSchedulerPort.
 */
Status derive_job_role(const JobPlace &place, std::string_view layout, const std::string &scheduler,
                       JobRole *out);

/** The scheduler port when neither AFMESH_SCHEDULER nor the launcher gives one. */
constexpr int64_t kJobSchedulerPort = 29510;

/** The first host of a Slurm host list: "node[07-09,12],gpu1" gives "node07". */
std::string first_slurm_host(std::string_view list);

/** One line for logs and `afmesh info`: the launcher, the place and what it made of it. */
std::string describe_job(const JobPlace &place, const JobRole &role);

}  // namespace afmesh
