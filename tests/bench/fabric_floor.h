// SPDX-License-Identifier: Apache-2.0
// The raw libfabric floor for afmesh-transport-bench: the same write-with-
// immediate ping-pong as the transport bench does through the fabric
// module, written directly against libfabric (two RDM endpoints of the
// named provider in this process, one thread each), so the module's own
// cost shows as the ratio between the two.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace afmesh::bench {

/**
 * Round-trip times in microseconds of `iters` ping-pongs of `bytes` after
 * `warmup` more: fi_writedata with the round's number as remote CQ data,
 * answered by the same write back. `provider` as in AFMESH_FABRIC_PROVIDER
 * (e.g. "shm", "tcp;ofi_rxm"). `wait`: block in fi_cq_sread between
 * completions instead of spinning on fi_cq_read. Throws std::runtime_error
 * naming the libfabric call that failed.
 */
std::vector<double> fabric_pingpong(const std::string &provider, size_t bytes, size_t warmup, size_t iters, bool wait);

}  // namespace afmesh::bench
