// SPDX-License-Identifier: Apache-2.0
#include "discovery.h"

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>

#include "afmesh/hal/module.h"

namespace afmesh::ibverbs {
namespace {

/** One AFMESH_NET_DEVICES entry; -1 means "any". */
struct AllowEntry {
    std::string device;
    int port = -1;
    int gid_index = -1;
};

std::string format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char *fmt, ...) {
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    return text;
}

bool parse_number(const std::string &text, int max, int *out) {
    if (text.empty() || text.size() > 5 || text.find_first_not_of("0123456789") != std::string::npos) return false;
    *out = std::atoi(text.c_str());
    return *out <= max;
}

bool parse_allow_list(const char *text, std::vector<AllowEntry> *out, std::string *why) {
    std::string list = text ? text : "";
    size_t start = 0;
    while (start < list.size()) {
        size_t end = list.find(',', start);
        if (end == std::string::npos) end = list.size();
        const std::string item = list.substr(start, end - start);
        start = end + 1;
        if (item.empty()) continue;
        AllowEntry entry;
        const size_t colon = item.find(':');
        entry.device = item.substr(0, colon);
        bool ok = !entry.device.empty();
        if (ok && colon != std::string::npos) {
            const size_t second = item.find(':', colon + 1);
            ok = parse_number(item.substr(colon + 1, second - colon - 1), 255, &entry.port) && entry.port >= 1;
            if (ok && second != std::string::npos) ok = parse_number(item.substr(second + 1), 65535, &entry.gid_index);
        }
        if (!ok) {
            *why = "AFMESH_NET_DEVICES entry '" + item + "' is not device[:port[:gid_index]] (e.g. mlx5_0:1 or mlx5_0:1:3)";
            return false;
        }
        out->push_back(entry);
    }
    return true;
}

const char *port_state_name(ibv_port_state state) {
    switch (state) {
    case IBV_PORT_NOP: return "NOP";
    case IBV_PORT_DOWN: return "DOWN";
    case IBV_PORT_INIT: return "INIT";
    case IBV_PORT_ARMED: return "ARMED";
    case IBV_PORT_ACTIVE: return "ACTIVE";
    case IBV_PORT_ACTIVE_DEFER: return "ACTIVE_DEFER";
    }
    return "unknown";
}

// The GID type from verbs when this rdma-core has _ibv_query_gid_ex, else
// from sysfs, where the kernel has published it since 4.9.
bool gid_type(const VerbsApi &api, ibv_context *context, const std::string &device, uint8_t port, int index,
              uint32_t *type) {
    if (api.query_gid_ex) {
        ibv_gid_entry entry{};
        if (api.query_gid_ex(context, port, static_cast<uint32_t>(index), &entry, 0, sizeof entry) != 0) return false;
        *type = entry.gid_type;
        return true;
    }
    std::ifstream in("/sys/class/infiniband/" + device + "/ports/" + std::to_string(port) + "/gid_attrs/types/" +
                     std::to_string(index));
    std::string text;
    if (!std::getline(in, text)) return false;
    *type = text.find("v2") != std::string::npos ? IBV_GID_TYPE_ROCE_V2 : IBV_GID_TYPE_ROCE_V1;
    return true;
}

struct GidCandidate {
    int index = -1;
    ibv_gid gid{};
    GidKind kind = GidKind::kEmpty;
};

// Reads one GID table entry; an unreadable one is reported as empty.
GidCandidate read_gid(const VerbsApi &api, ibv_context *context, const std::string &device, uint8_t port, int index) {
    GidCandidate candidate;
    candidate.index = index;
    uint32_t type = 0;
    if (api.query_gid(context, port, index, &candidate.gid) != 0 || !gid_type(api, context, device, port, index, &type))
        return candidate;
    candidate.kind = classify_gid(candidate.gid, type);
    return candidate;
}

/** Discovery state while walking the devices. */
class Walker {
public:
    Walker(const VerbsApi &api, Discovery *out) : api_(api), out_(out) {}

    /** Examines `port` (or every port when -1) of an open device. False: a hard error in `why`. */
    bool examine(ibv_context *context, const std::string &device, const ibv_device_attr &attr, int port, int gid_index,
                 std::string *why) {
        if (port > attr.phys_port_cnt) {
            *why = format("AFMESH_NET_DEVICES names port %d of %s, which has %u port(s)", port, device.c_str(),
                          unsigned{attr.phys_port_cnt});
            return false;
        }
        const int first = port > 0 ? port : 1, last = port > 0 ? port : attr.phys_port_cnt;
        for (int p = first; p <= last; ++p)
            if (!examine_port(context, device, attr, static_cast<uint8_t>(p), gid_index, why)) return false;
        return true;
    }

    bool chose() const { return out_->context != nullptr; }

private:
    bool examine_port(ibv_context *context, const std::string &device, const ibv_device_attr &attr, uint8_t port,
                      int gid_index, std::string *why) {
        ibv_port_attr port_attr;
        memset(&port_attr, 0, sizeof port_attr);
        const std::string name = device + " port " + std::to_string(port);
        if (api_.query_port(context, port, &port_attr) != 0) {
            note(name + ": ibv_query_port failed (" + strerror(errno) + "), not used");
            return true;
        }
        if (port_attr.state != IBV_PORT_ACTIVE) {
            note(name + ": " + port_state_name(port_attr.state) + ", not used (not active)");
            return true;
        }
        PortChoice choice;
        choice.device = device;
        choice.port = port;
        choice.roce = port_attr.link_layer == IBV_LINK_LAYER_ETHERNET;
        choice.mtu = port_attr.active_mtu;
        choice.max_msg_size = port_attr.max_msg_sz;
        const std::string link = format("%s, ACTIVE, MTU %s", choice.roce ? "RoCE (Ethernet)" : "InfiniBand",
                                        mtu_name(choice.mtu));
        if (choice.roce) {
            if (!pick_gid(context, device, port, port_attr.gid_tbl_len, gid_index, &choice, why)) return false;
            if (choice.gid_kind == GidKind::kEmpty) {
                note(name + ": " + link + ", not used (no usable RoCE GID)");
                return true;
            }
        } else {
            if (port_attr.lid == 0) {
                note(name + ": " + link + ", not used (no LID assigned: is a subnet manager running?)");
                return true;
            }
            choice.lid = port_attr.lid;
        }
        const std::string address =
            choice.roce ? format("GID %u %s (%s)", unsigned{choice.gid_index}, format_gid(choice.gid).c_str(),
                                 gid_kind_name(choice.gid_kind))
                        : format("LID 0x%x", unsigned{choice.lid});
        if (chose()) {
            note(name + ": " + link + ", " + address + ", usable, not used (one port per context)");
            return true;
        }
        note(name + ": " + link + ", " + address + ", used");
        out_->context = context;
        out_->device_attr = attr;
        out_->choice = choice;
        return true;
    }

    // The configured GID index, or the most preferred GID of the table.
    bool pick_gid(ibv_context *context, const std::string &device, uint8_t port, int table_size, int configured,
                  PortChoice *choice, std::string *why) {
        if (configured >= 0) {
            const GidCandidate c = read_gid(api_, context, device, port, configured);
            if (configured >= table_size || c.kind == GidKind::kEmpty) {
                *why = format("AFMESH_NET_DEVICES names GID index %d of %s port %u, which is empty or beyond the "
                              "table of %d entries",
                              configured, device.c_str(), unsigned{port}, table_size);
                return false;
            }
            note(format("  GID %d %s (%s): configured", configured, format_gid(c.gid).c_str(), gid_kind_name(c.kind)));
            set_gid(c, choice);
            return true;
        }
        GidCandidate best;
        for (int i = 0; i < table_size; ++i) {
            const GidCandidate c = read_gid(api_, context, device, port, i);
            if (c.kind == GidKind::kEmpty) continue;
            note(format("  GID %d %s (%s)", i, format_gid(c.gid).c_str(), gid_kind_name(c.kind)));
            if (gid_preference(c.kind) > gid_preference(best.kind)) best = c;
        }
        if (best.index >= 0) set_gid(best, choice);
        return true;
    }

    static void set_gid(const GidCandidate &c, PortChoice *choice) {
        choice->gid_index = static_cast<uint8_t>(c.index);
        choice->gid = c.gid;
        choice->gid_kind = c.kind;
    }

    void note(std::string line) { out_->found.push_back(std::move(line)); }

    const VerbsApi &api_;
    Discovery *out_;
};

/** The device list, freed on scope exit. */
struct DeviceList {
    const VerbsApi &api;
    ibv_device **list;
    int count;
    ~DeviceList() {
        if (list) api.free_device_list(list);
    }
    ibv_device *find(const std::string &name) const {
        for (int i = 0; i < count; ++i)
            if (name == api.get_device_name(list[i])) return list[i];
        return nullptr;
    }
    std::string names() const {
        std::string all;
        for (int i = 0; i < count; ++i) all += (i ? ", " : "") + std::string(api.get_device_name(list[i]));
        return all;
    }
};

}  // namespace

const char *mtu_name(ibv_mtu mtu) {
    switch (mtu) {
    case IBV_MTU_256: return "256";
    case IBV_MTU_512: return "512";
    case IBV_MTU_1024: return "1024";
    case IBV_MTU_2048: return "2048";
    case IBV_MTU_4096: return "4096";
    }
    return "?";
}

int discover(const VerbsApi &api, const char *allow_list, Discovery *out, std::string *why) {
    std::vector<AllowEntry> entries;
    if (!parse_allow_list(allow_list, &entries, why)) return AFMESH_HAL_ERROR;
    errno = 0;
    int count = 0;
    DeviceList devices{api, api.get_device_list(&count), count};
    if (!devices.list) {
        const int error = errno;
        *why = std::string("ibv_get_device_list: ") + (error ? strerror(error) : "failed");
        if (error == ENOSYS) *why += " (this kernel has no RDMA support: no ib_uverbs, no /dev/infiniband)";
        return AFMESH_HAL_NOT_PRESENT;
    }
    if (count == 0) {
        *why = "no RDMA devices found";
        return AFMESH_HAL_NOT_PRESENT;
    }
    if (entries.empty())
        for (int i = 0; i < count; ++i) entries.push_back({api.get_device_name(devices.list[i]), -1, -1});
    for (const AllowEntry &entry : entries)
        if (!devices.find(entry.device)) {
            *why = "AFMESH_NET_DEVICES names '" + entry.device + "', which is not an RDMA device on this host (found: " +
                   devices.names() + ")";
            return AFMESH_HAL_ERROR;
        }

    Walker walker(api, out);
    for (const AllowEntry &entry : entries) {
        ibv_context *context = api.open_device(devices.find(entry.device));
        if (!context) {
            out->found.push_back(entry.device + ": ibv_open_device failed (" + strerror(errno) + "), not used");
            continue;
        }
        ibv_device_attr attr{};
        bool ok = api.query_device(context, &attr) == 0;
        if (!ok) out->found.push_back(entry.device + ": ibv_query_device failed (" + strerror(errno) + "), not used");
        const bool had_choice = walker.chose();
        if (ok && !walker.examine(context, entry.device, attr, entry.port, entry.gid_index, why)) {
            if (out->context && out->context != context) api.close_device(out->context);
            api.close_device(context);
            out->context = nullptr;
            return AFMESH_HAL_ERROR;
        }
        if (walker.chose() && !had_choice) continue;  // keep the chosen device open
        api.close_device(context);
    }
    if (walker.chose()) return AFMESH_HAL_OK;
    *why = "no usable RDMA port";
    for (const std::string &line : out->found) *why += "; " + line;
    return AFMESH_HAL_NOT_PRESENT;
}

}  // namespace afmesh::ibverbs
