// SPDX-License-Identifier: Apache-2.0
// When small tensors travel inside the REQUEST or RESPONSE (eager) instead
// of in writes of their own: one transport operation instead of two, paid
// for by one copy on the receiver. Where that trade pays depends on the
// transport (caps.eager_send_size, measured per module and provider); the
// user's AFMESH_EAGER_BYTES overrides it.
#pragma once

#include <cstdint>

#include "config.h"
#include "module_loader.h"

namespace afmesh {

struct EagerPolicy {
    /** Where the limits come from. */
    enum class Source { kSetting, kTransport, kDefault };

    /** Tensor bytes, in all, one message may carry. */
    uint64_t max_bytes = 0;
    /** The whole message with them, header included; never above the transport's max_send_size. */
    uint64_t max_message = 0;
    Source source = Source::kDefault;

    /** Whether `tensor_bytes` may ride in a message whose header is `header_bytes`. */
    bool admits(uint64_t header_bytes, uint64_t tensor_bytes) const {
        return tensor_bytes <= max_bytes && header_bytes + tensor_bytes <= max_message;
    }
};

/**
 * AFMESH_EAGER_BYTES where the user set it (up to the transport's message
 * limit); otherwise the transport's eager_send_size (ABI 1.5); otherwise,
 * for an older module, the setting's default.
 */
EagerPolicy eager_policy(const Config &config, const Module &transport);

/** "AFMESH_EAGER_BYTES", "the transport" or "the default", for afmesh info. */
const char *eager_source_name(EagerPolicy::Source source);

}  // namespace afmesh
