// SPDX-License-Identifier: Apache-2.0
// What `afmesh info` reports: gathered once from a Config (probing every
// module on the search path), then written as text or as JSON.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "config.h"
#include "eager_policy.h"
#include "module_loader.h"

namespace afmesh::tool {

/** One AFMESH_* variable as shown: secrets already masked. */
struct VariableRow {
    const VarSpec *spec;
    std::string value;  // the current value, or the default when unset
    bool is_set;        // set by the environment, an alias or the API (a module's: by the environment)
};

/** The settings one module declared (ABI 1.4), as shown after the core's. */
struct ModuleVariables {
    afmesh_module_kind kind;
    std::string module;
    std::vector<VariableRow> variables;
};

/** One device of the selected device module. */
struct DeviceRow {
    int index;
    std::string name, bus_id;
    uint64_t total_memory;
};

/** The module AFMESH_DEVICE or AFMESH_TRANSPORT selected, or why none was. */
struct Selection {
    bool selected = false;
    std::string name, path, version;
    std::string error;  // set when !selected
};

/** How the cluster keeps strangers out. */
struct SecurityReport {
    std::string data_plane;        // how every data connection is authenticated
    bool admission_token = false;  // AFMESH_AUTH_TOKEN is set: the scheduler admits only nodes holding it
};

struct InfoReport {
    std::optional<JobPlace> job_place;  // the job manager that started this process, if any
    std::optional<JobRole> job_role;    // what AFMESH_LAYOUT made of it
    std::vector<std::string> search_dirs;
    std::vector<ModuleRecord> modules;  // every file found, after probing
    Selection device, transport;
    std::vector<DeviceRow> devices;  // of the selected device module
    afmesh_net_caps caps{};          // of the selected transport
    EagerPolicy eager;               // what rides in requests and answers over it
    std::vector<VariableRow> variables;                 // the core's
    std::vector<ModuleVariables> module_variables;      // of every module that declared some
    SecurityReport security;
    std::vector<std::string> notes;   // configuration warnings, and devices that could not be listed
    std::vector<std::string> errors;  // each one makes `afmesh info` fail

    bool ok() const { return errors.empty(); }
};

/** Probes every module, selects a device and a transport, and reads every variable of `config`. */
InfoReport gather_info(const Config &config);

void write_info_text(const InfoReport &report, FILE *out);
void write_info_json(const InfoReport &report, FILE *out);
/** The GPU x NIC matrix and each local rank's NIC, from sysfs under AFMESH_SYSFS_ROOT. */
void write_topology_text(const InfoReport &report, const Config &config, FILE *out);

/** "device" or "transport". */
const char *module_kind_name(afmesh_module_kind kind);
/** "major.minor" of the ABI a module answered with (major 0: it never answered). */
std::string abi_text(const ModuleRecord &record);
/** Whether the loader tried `record` (dlopen, query, init()), so that its probe time means something. */
bool was_probed(const ModuleRecord &record);
/** Names of the AFMESH_NET_CAP_* bits set in `flags`. */
std::vector<std::string> cap_flag_names(uint32_t flags);
/** Names of the memory kinds in an AFMESH_MEM_BIT mask. */
std::vector<std::string> mem_kind_names(uint32_t mask);

}  // namespace afmesh::tool
