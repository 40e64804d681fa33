// SPDX-License-Identifier: Apache-2.0
#include "job_env.h"

#include <cerrno>
#include <cstdlib>

namespace afmesh {
namespace {

// The variables one launcher sets. `local_rank` and `local_size` are null
// where the launcher has no such variable.
struct LauncherVars {
    const char *launcher;
    const char *rank, *size, *local_rank, *local_size;
};

constexpr LauncherVars kTorchrun = {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"};
constexpr LauncherVars kOpenMpi = {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                                   "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"};
constexpr LauncherVars kPmi = {"PMI", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"};
constexpr LauncherVars kSlurm = {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"};
constexpr LauncherVars kLeaderWorkerSet = {"LeaderWorkerSet", "LWS_WORKER_INDEX", "LWS_GROUP_SIZE", nullptr, nullptr};

const std::string *find(const EnvMap &env, const char *name) {
    if (!name) return nullptr;
    auto it = env.find(name);
    return it == env.end() ? nullptr : &it->second;
}

// A launcher's variable as a number from `least` up, or INVALID_ARGUMENT naming it.
Status read_number(const EnvMap &env, const char *launcher, const char *name, int64_t least, int64_t *out) {
    const std::string &text = *find(env, name);
    char *end = nullptr;
    errno = 0;
    const long long value = strtoll(text.c_str(), &end, 10);
    if (text.empty() || *end || errno || value < least)
        return {Code::kInvalidArgument, std::string(launcher) + " set " + name + "=" + text + ", not a number of " +
                                            std::to_string(least) + " or more"};
    *out = value;
    return Status::ok();
}

// Reads `vars` when their rank and size are both set; *found says whether they were.
Status read_place(const EnvMap &env, const LauncherVars &vars, JobPlace *place, bool *found) {
    *found = find(env, vars.rank) && find(env, vars.size);
    if (!*found) return Status::ok();
    place->launcher = vars.launcher;
    if (Status s = read_number(env, vars.launcher, vars.size, 1, &place->size); !s) return s;
    if (Status s = read_number(env, vars.launcher, vars.rank, 0, &place->rank); !s) return s;
    if (place->rank >= place->size)
        return {Code::kInvalidArgument, std::string(vars.launcher) + " set " + vars.rank + "=" +
                                            std::to_string(place->rank) + ", past " + vars.size + "=" +
                                            std::to_string(place->size)};
    if (find(env, vars.local_rank))
        if (Status s = read_number(env, vars.launcher, vars.local_rank, 0, &place->local_rank); !s) return s;
    if (find(env, vars.local_size))
        if (Status s = read_number(env, vars.launcher, vars.local_size, 1, &place->local_size); !s) return s;
    return Status::ok();
}

// The launcher-specific parts: where rank 0 runs, and a port for the scheduler.
Status add_rendezvous(const EnvMap &env, JobPlace *place) {
    if (place->launcher == kTorchrun.launcher) {
        // torch.distributed's own store listens on MASTER_PORT: the scheduler takes the next one.
        if (const std::string *host = find(env, "MASTER_ADDR")) place->first_host = *host;
        if (find(env, "MASTER_PORT")) {
            if (Status s = read_number(env, "torchrun", "MASTER_PORT", 1, &place->suggested_port); !s) return s;
            place->suggested_port += 1;
        }
    } else if (place->launcher == kSlurm.launcher) {
        const std::string *nodes = find(env, "SLURM_STEP_NODELIST");
        if (!nodes) nodes = find(env, "SLURM_JOB_NODELIST");
        if (nodes) place->first_host = first_slurm_host(*nodes);
        // Two jobs sharing a host must not share a port: derive it from the job id.
        int64_t job = 0;
        if (find(env, "SLURM_JOB_ID") && read_number(env, "Slurm", "SLURM_JOB_ID", 0, &job))
            place->suggested_port = 20000 + job % 20000;
    } else if (place->launcher == kLeaderWorkerSet.launcher) {
        if (const std::string *leader = find(env, "LWS_LEADER_ADDRESS")) place->first_host = *leader;
        place->local_size = 1;  // one process per pod
    }
    // Every process on one host: rank 0 is on this one.
    if (place->first_host.empty() && place->local_size == place->size) place->first_host = "127.0.0.1";
    return Status::ok();
}

// "W" of "workers:W"; false when `layout` does not start with `prefix` or the number is malformed.
bool layout_count(std::string_view layout, std::string_view prefix, int64_t *count) {
    if (layout.substr(0, prefix.size()) != prefix) return false;
    const std::string digits(layout.substr(prefix.size()));
    char *end = nullptr;
    errno = 0;
    const long long value = strtoll(digits.c_str(), &end, 10);
    if (digits.empty() || *end || errno || value < 0) return false;
    *count = value;
    return true;
}

Status split_globally(const JobPlace &place, std::string_view layout, int64_t first_count, bool first_are_workers,
                      JobRole *out) {
    if (first_count < 1 || first_count >= place.size)
        return {Code::kInvalidArgument, "AFMESH_LAYOUT=" + std::string(layout) + " leaves no worker or no server among " +
                                            std::to_string(place.size) + " processes"};
    const bool first = place.rank < first_count;
    out->worker = first == first_are_workers;
    out->rank = first ? place.rank : place.rank - first_count;
    out->num_workers = first_are_workers ? first_count : place.size - first_count;
    out->num_servers = place.size - out->num_workers;
    return Status::ok();
}

Status split_per_host(const JobPlace &place, int64_t workers_per_host, JobRole *out) {
    const int64_t per_host = place.local_size;
    if (per_host == 0)
        return {Code::kInvalidArgument, "AFMESH_LAYOUT=workers-per-host needs the processes per host, which " +
                                            place.launcher + " does not say: use servers:S or workers:W"};
    if (workers_per_host < 1 || workers_per_host >= per_host)
        return {Code::kInvalidArgument, "AFMESH_LAYOUT=workers-per-host:" + std::to_string(workers_per_host) +
                                            " leaves no worker or no server among " + std::to_string(per_host) +
                                            " processes per host"};
    if (place.size % per_host != 0 || place.rank % per_host != place.local_rank)
        return {Code::kInvalidArgument, "AFMESH_LAYOUT=workers-per-host needs ranks placed host by host, " +
                                            std::to_string(per_host) + " per host (global rank " +
                                            std::to_string(place.rank) + " is local rank " +
                                            std::to_string(place.local_rank) + ")"};
    const int64_t host = place.rank / per_host, hosts = place.size / per_host;
    const int64_t servers_per_host = per_host - workers_per_host;
    out->worker = place.local_rank < workers_per_host;
    out->rank = out->worker ? host * workers_per_host + place.local_rank
                            : host * servers_per_host + place.local_rank - workers_per_host;
    out->num_workers = hosts * workers_per_host;
    out->num_servers = hosts * servers_per_host;
    return Status::ok();
}

}  // namespace

Status detect_job_place(const EnvMap &env, std::optional<JobPlace> *out) {
    out->reset();
    for (const LauncherVars *vars : {&kTorchrun, &kOpenMpi, &kPmi, &kSlurm, &kLeaderWorkerSet}) {
        JobPlace place;
        bool found = false;
        if (Status s = read_place(env, *vars, &place, &found); !s) return s;
        if (!found) continue;
        if (Status s = add_rendezvous(env, &place); !s) return s;
        *out = std::move(place);
        return Status::ok();
    }
    return Status::ok();
}

Status derive_job_role(const JobPlace &place, std::string_view layout, const std::string &scheduler,
                       JobRole *out) {
    int64_t count = 0;
    Status s;
    if (layout.empty())
        s = {Code::kInvalidArgument, "started by " + place.launcher +
                                         " without AFMESH_ROLE: set AFMESH_LAYOUT to say which processes are servers "
                                         "(servers:S, workers:W or workers-per-host:W)"};
    else if (layout_count(layout, "servers:", &count))
        s = split_globally(place, layout, count, false, out);
    else if (layout_count(layout, "workers:", &count))
        s = split_globally(place, layout, count, true, out);
    else if (layout_count(layout, "workers-per-host:", &count))
        s = split_per_host(place, count, out);
    else
        s = {Code::kInvalidArgument, "AFMESH_LAYOUT=" + std::string(layout) +
                                         " is not servers:S, workers:W or workers-per-host:W"};
    if (!s) return s;
    out->runs_scheduler = place.rank == 0;
    if (!scheduler.empty()) {
        out->scheduler = scheduler;
        return Status::ok();
    }
    if (place.first_host.empty())
        return {Code::kInvalidArgument, place.launcher + " does not say where global rank 0 runs: set "
                                                         "AFMESH_SCHEDULER=<its host>:<port>"};
    const bool bare_v6 = place.first_host.find(':') != std::string::npos && place.first_host[0] != '[';
    out->scheduler = (bare_v6 ? "[" + place.first_host + "]" : place.first_host) + ":" +
                     std::to_string(place.suggested_port ? place.suggested_port : kJobSchedulerPort);
    return Status::ok();
}

std::string first_slurm_host(std::string_view list) {
    std::string host;
    bool in_brackets = false, in_first_item = false, past_first_number = false;
    for (char c : list) {
        if (!in_brackets) {
            if (c == ',') break;
            if (c == '[') {
                in_brackets = in_first_item = true;
                past_first_number = false;
            } else {
                host += c;
            }
            continue;
        }
        if (c == ']') {
            in_brackets = false;
        } else if (c == ',' || c == '-') {
            past_first_number = true;
            if (c == ',') in_first_item = false;
        } else if (in_first_item && !past_first_number) {
            host += c;
        }
    }
    return host;
}

std::string describe_job(const JobPlace &place, const JobRole &role) {
    std::string text = "started by " + place.launcher + ": global rank " + std::to_string(place.rank) + " of " +
                       std::to_string(place.size);
    if (place.local_size) text += " (local rank " + std::to_string(place.local_rank) + " of " + std::to_string(place.local_size) + ")";
    text += std::string(" is ") + (role.worker ? "worker " : "server ") + std::to_string(role.rank) + " of " +
            std::to_string(role.worker ? role.num_workers : role.num_servers) + "; scheduler " + role.scheduler +
            (role.runs_scheduler ? ", run by this process" : ", run by global rank 0");
    return text;
}

}  // namespace afmesh
