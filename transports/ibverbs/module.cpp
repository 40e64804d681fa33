// SPDX-License-Identifier: Apache-2.0
// The module's C ABI edge: afmesh_module_query hands out the operation table
// that forwards to Context (transports/common/net_module.h) and the module's
// own settings (settings.h).
#include "context.h"
#include "ibverbs/wire.h"
#include "net_host.h"
#include "settings.h"

namespace {
constexpr const char *kVersion = "0.1.0 (rdma-core verbs, RC QPs, handshake version 1)";
static_assert(afmesh::ibverbs::kWireVersion == 1, "kVersion names the handshake version");
}  // namespace

extern "C" AFMESH_MODULE_EXPORT int afmesh_module_query(uint32_t host_abi_major, const afmesh_host_services *host,
                                                        afmesh_module_desc *out) {
    return afmesh::net_module::answer_query<afmesh::ibverbs::Context>(host_abi_major, host, out, "ibverbs", kVersion,
                                                                      afmesh::ibverbs::kSettings);
}
