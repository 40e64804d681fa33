// SPDX-License-Identifier: Apache-2.0
// The libfabric objects one context shares between its endpoints: the
// chosen provider, fabric, domain and address vector, and the attributes the
// data path consults.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include <cstddef>
#include <cstdint>

#include "counters.h"

namespace afmesh::fabric {

struct Fabric {
    fi_info *info = nullptr;  // the chosen provider (owned by the context)
    fid_fabric *fabric = nullptr;
    fid_domain *domain = nullptr;
    fid_av *av = nullptr;
    uint64_t mr_mode = 0;        // info->domain_attr->mr_mode as granted
    size_t inject_size = 0;      // tx_attr->inject_size: writes up to this are copied at post
    uint32_t write_segs = 1;     // pieces one fi_writemsg takes (iov and rma_iov limits, capped)
    size_t tx_depth = 0;         // operations one endpoint keeps in flight
    size_t rx_depth = 0;         // rx_attr->size: receives one endpoint may have posted
    bool wait_fd = false;        // CQs are opened with FI_WAIT_FD
    bool recv_consumes_data = false;  // FI_RX_CQ_DATA: remote CQ data consumes a posted receive
    bool unique_names = false;        // shm: endpoints get names no other process has (endpoint.cpp)
    // Remote CQ data has 8 bytes: a write carries its target connection's id
    // in the high word, above the 32-bit immediate (wire.h).
    bool tagged_writes = false;
    // One endpoint serves every connection (attributed by header ids and
    // write tags) instead of one endpoint per connection (context.h).
    bool shared_endpoint = false;
    Counters counters{kCounterSpecs};  // bumped by the context and its endpoints
};

}  // namespace afmesh::fabric
