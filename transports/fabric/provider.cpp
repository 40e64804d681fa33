// SPDX-License-Identifier: Apache-2.0
#include "provider.h"

#include <dirent.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <string>

#include "afmesh/hal/module.h"
#include "libfabric_api.h"
#include "net_host.h"
#include "nic_match.h"

namespace afmesh::fabric {
namespace {

constexpr uint64_t kCaps = FI_MSG | FI_RMA | FI_SEND | FI_RECV | FI_WRITE | FI_REMOTE_WRITE;
// Every mode bit whose obligation the module meets: operation contexts are
// fi_context2-sized, and remote CQ data may consume posted receives.
constexpr uint64_t kModes = FI_CONTEXT | FI_CONTEXT2 | FI_RX_CQ_DATA;
// Every registration mode the module handles (see registration.h).
constexpr int kMrModes = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
constexpr size_t kMinCqData = 4;

struct InfoDeleter {
    void operator()(fi_info *info) const { libfabric().freeinfo(info); }
};
using InfoPtr = std::unique_ptr<fi_info, InfoDeleter>;

// fi_allocinfo(), which is an inline call of fi_dupinfo(NULL).
InfoPtr allocate_info() { return InfoPtr(libfabric().dupinfo(nullptr)); }

InfoPtr make_hints(const char *provider, bool hmem) {
    InfoPtr hints = allocate_info();
    if (!hints) return hints;
    hints->caps = kCaps | (hmem ? FI_HMEM : 0);
    hints->mode = kModes;
    hints->ep_attr->type = FI_EP_RDM;
    hints->domain_attr->mr_mode = kMrModes | (hmem ? FI_MR_HMEM : 0);
    hints->domain_attr->threading = FI_THREAD_SAFE;
    hints->domain_attr->control_progress = FI_PROGRESS_MANUAL;
    hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
    if (provider) hints->fabric_attr->prov_name = strdup(provider);
    return hints;
}

// Providers that only emulate a fabric over the host's own sockets or memory.
// The automatic choice skips them: the tcp module already serves that case
// (and crosses hosts, which shm cannot); naming one in AFMESH_FABRIC_PROVIDER
// still uses it. `sockets` is also slow here (milliseconds per operation).
bool is_software(const fi_info *info) {
    static const char *const kSoftware[] = {"sockets", "tcp", "net", "udp", "shm", "sm2"};
    // Layered providers read "tcp;ofi_rxm": the core provider is the first name.
    const char *name = info->fabric_attr->prov_name;
    const size_t core_len = strcspn(name, ";");
    for (const char *software : kSoftware)
        if (strlen(software) == core_len && strncmp(name, software, core_len) == 0) return true;
    return false;
}

// Why `info` (from a survey without capability hints) cannot serve this module, or nullptr.
const char *unusable_because(const fi_info *info) {
    if (info->ep_attr->type != FI_EP_RDM) return "no RDM endpoints";
    if ((info->caps & FI_RMA) == 0 || (info->caps & FI_WRITE) == 0) return "no FI_RMA writes";
    if ((info->caps & FI_MSG) == 0) return "no FI_MSG messages";
    if (info->domain_attr->cq_data_size < kMinCqData) return "less than 4 bytes of remote CQ data";
    if (info->domain_attr->mr_mode & FI_MR_ENDPOINT)
        return "requires FI_MR_ENDPOINT (regions bound to one endpoint; here a region serves every endpoint of a context)";
    if (info->domain_attr->mr_mode & ~(kMrModes | FI_MR_HMEM | FI_MR_BASIC | FI_MR_SCALABLE))
        return "requires a registration mode this module does not implement (e.g. FI_MR_RAW)";
    return nullptr;
}

// "tcp;ofi_rxm, shm": the distinct software providers among `candidates`, or "none".
std::string software_names(const fi_info *candidates) {
    std::set<std::string> names;
    for (const fi_info *info = candidates; info; info = info->next)
        if (!unusable_because(info) && is_software(info)) names.insert(info->fabric_attr->prov_name);
    std::string out;
    for (const std::string &name : names) out += (out.empty() ? "" : ", ") + name;
    return out.empty() ? "none" : out;
}

// A survey of every RDM provider and domain libfabric offers, with the verdict on each.
std::string survey(const fi_info *candidates, const fi_info *chosen, const char *requested) {
    fi_info *all = nullptr;
    InfoPtr hints = allocate_info();
    if (hints) hints->ep_attr->type = FI_EP_RDM;
    std::string out;
    if (libfabric().getinfo(kFabricApiVersion, nullptr, nullptr, 0, hints.get(), &all) != 0 || !all)
        return "libfabric offers no RDM provider at all\n";
    InfoPtr owner(all);
    std::set<std::string> seen;
    for (const fi_info *info = all; info; info = info->next) {
        const std::string name = std::string(info->fabric_attr->prov_name) + " (domain " + info->domain_attr->name + ")";
        if (!seen.insert(name).second) continue;
        bool candidate = false;
        for (const fi_info *c = candidates; c && !candidate; c = c->next)
            candidate = strcmp(c->fabric_attr->prov_name, info->fabric_attr->prov_name) == 0 &&
                        strcmp(c->domain_attr->name, info->domain_attr->name) == 0;
        std::string verdict;
        if (chosen && strcmp(chosen->fabric_attr->prov_name, info->fabric_attr->prov_name) == 0 &&
            strcmp(chosen->domain_attr->name, info->domain_attr->name) == 0)
            verdict = "chosen";
        else if (requested && strcmp(requested, info->fabric_attr->prov_name) != 0)
            verdict = "not used: AFMESH_FABRIC_PROVIDER names another provider";
        else if (candidate && !requested && is_software(info))
            verdict = "usable, excluded from automatic choice (software emulation: the tcp module serves this); "
                      "name it in AFMESH_FABRIC_PROVIDER to use it";
        else if (candidate)
            verdict = "usable, not chosen (an earlier one was)";
        else if (const char *why = unusable_because(info))
            verdict = std::string("unusable: ") + why;
        else
            verdict = "unusable: does not grant the modes, threading or progress this module asks for";
        out += "provider " + name + ": " + verdict + "\n";
    }
    return out;
}

// Kernel device classes that list every device a hardware provider drives:
// RDMA devices (verbs, efa, usnic and psm3, and psm2 and opx on hfi1) and
// HPE Slingshot's cxi.
constexpr const char *kDeviceClasses[] = {"sys/class/infiniband", "sys/class/cxi"};

bool lists_a_device(const std::string &dir) {
    DIR *d = opendir(dir.c_str());
    if (!d) return false;
    bool found = false;
    while (const dirent *e = readdir(d))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) found = true;
    closedir(d);
    return found;
}

}  // namespace

int rule_out_without_libfabric(Reason *why) {
    if (const char *requested = host_config("AFMESH_FABRIC_PROVIDER"); requested && *requested) return AFMESH_HAL_OK;
    const char *sysfs_root = host_config("AFMESH_SYSFS_ROOT");
    std::string root = sysfs_root ? sysfs_root : "";
    if (root.empty() || root.back() != '/') root += '/';
    for (const char *device_class : kDeviceClasses)
        if (lists_a_device(root + device_class)) return AFMESH_HAL_OK;
    why->format("no fabric hardware: %s%s and %s%s list no device; software providers are used only when "
                "AFMESH_FABRIC_PROVIDER names one (e.g. shm, 'tcp;ofi_rxm')",
                root.c_str(), kDeviceClasses[0], root.c_str(), kDeviceClasses[1]);
    return AFMESH_HAL_NOT_PRESENT;
}

int select_provider(const HmemProbe &hmem, Selection *out, Reason *why) {
    const char *requested = host_config("AFMESH_FABRIC_PROVIDER");
    fi_info *candidates = nullptr;
    bool with_hmem = hmem.any();
    for (;;) {
        InfoPtr hints = make_hints(requested, with_hmem);
        if (!hints) {
            why->format("fi_allocinfo failed");
            return AFMESH_HAL_NO_MEMORY;
        }
        const int rc = libfabric().getinfo(kFabricApiVersion, nullptr, nullptr, 0, hints.get(), &candidates);
        if (rc == 0 && candidates) break;
        candidates = nullptr;
        if (rc != -FI_ENODATA && rc != 0) host_log(AFMESH_LOG_DEBUG, "fi_getinfo: %s", fabric_strerror(-rc));
        if (!with_hmem) break;
        with_hmem = false;  // device memory is optional: the engine stages through host memory
    }
    InfoPtr owner(candidates);
    // A domain on the NIC AFMESH_NET_DEVICES names (the user's, or the core's
    // choice nearest the GPU) first; libfabric's own order otherwise.
    const char *nics = host_config("AFMESH_NET_DEVICES");
    const fi_info *chosen = nullptr, *first_usable = nullptr;
    for (const fi_info *info = candidates; info && !chosen; info = info->next) {
        if (unusable_because(info) || (!requested && is_software(info))) continue;
        if (!first_usable) first_usable = info;
        if (nics && domain_on_listed_nic(info->domain_attr->name, nics)) chosen = info;
    }
    if (!chosen && (chosen = first_usable) && nics && *nics)
        host_log(AFMESH_LOG_INFO, "no usable domain is on AFMESH_NET_DEVICES=%s: taking %s, libfabric's first", nics,
                 chosen->domain_attr->name);
    out->survey = survey(candidates, chosen, requested);
    if (!chosen) {
        if (requested)
            why->format("libfabric provider '%s' (AFMESH_FABRIC_PROVIDER) is not available with RDM endpoints, "
                        "FI_MSG, FI_RMA and remote CQ data",
                        requested);
        else
            why->format("no libfabric hardware provider offers RDM endpoints with FI_MSG, FI_RMA and remote CQ "
                        "data; software ones are used only when AFMESH_FABRIC_PROVIDER names one (usable here: %s)",
                        software_names(candidates).c_str());
        return AFMESH_HAL_NOT_PRESENT;
    }
    out->info = libfabric().dupinfo(chosen);
    if (!out->info) {
        why->format("fi_dupinfo failed");
        return AFMESH_HAL_NO_MEMORY;
    }
    out->hmem = (out->info->caps & FI_HMEM) != 0;
    return AFMESH_HAL_OK;
}

}  // namespace afmesh::fabric
