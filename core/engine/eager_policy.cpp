// SPDX-License-Identifier: Apache-2.0
#include "eager_policy.h"

namespace afmesh {

EagerPolicy eager_policy(const Config &config, const Module &transport) {
    const uint64_t max_send = transport.net_caps().max_send_size;
    const auto setting = static_cast<uint64_t>(config.get_int("AFMESH_EAGER_BYTES"));
    if (config.is_set("AFMESH_EAGER_BYTES")) return {setting, max_send, EagerPolicy::Source::kSetting};
    if (const uint32_t size = transport.eager_send_size(); size > 0)  // already within max_send
        return {size, size, EagerPolicy::Source::kTransport};
    return {setting, max_send, EagerPolicy::Source::kDefault};
}

const char *eager_source_name(EagerPolicy::Source source) {
    switch (source) {
        case EagerPolicy::Source::kSetting: return "AFMESH_EAGER_BYTES";
        case EagerPolicy::Source::kTransport: return "the transport";
        case EagerPolicy::Source::kDefault: return "the default";
    }
    return "?";
}

}  // namespace afmesh
