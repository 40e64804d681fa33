// SPDX-License-Identifier: Apache-2.0
// Control entry points of the in-process verbs emulation (libafmesh_verbs_emu.so).
// The emulation exports the libibverbs symbols the ibverbs module resolves;
// tests that link it also steer it through these. Topology changes apply to
// device lists and contexts opened afterwards.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Restores the default fabric: one active RoCE port "emu_roce0" port 1 whose GIDs include ::ffff:127.0.0.1 as v1 and v2. */
void afmesh_verbs_emu_reset(void);
/** Removes every device (the device list is then empty). */
void afmesh_verbs_emu_clear(void);
/** Adds a device; returns its index. */
int afmesh_verbs_emu_add_device(const char *name);
/** Adds a port (link_layer: IBV_LINK_LAYER_*, state: IBV_PORT_*, mtu: IBV_MTU_*); returns its number. */
int afmesh_verbs_emu_add_port(int device, int link_layer, int state, uint16_t lid, int mtu);
/** Appends a GID (IPv6 text) of type IBV_GID_TYPE_* to a port's table; "::" leaves the slot empty. */
void afmesh_verbs_emu_add_gid(int device, int port, const char *gid, int type);
/** Makes ibv_get_device_list fail with `error` (0: succeed again). */
void afmesh_verbs_emu_fail_device_list(int error);
/** Makes a QP unreachable, as if its host vanished: requests to it end in retry-exceeded errors. */
void afmesh_verbs_emu_break_qp(uint32_t qpn);
/** The number of the QP created last (a listener's QP once a connection is up). */
uint32_t afmesh_verbs_emu_last_qpn(void);
/** How many completions were lost to a full CQ (a module bug when non-zero). */
uint64_t afmesh_verbs_emu_cq_overflows(void);

/** One work request of an ibv_post_send call, as the caller posted it (the first SGE only). */
typedef struct afmesh_verbs_emu_posted {
    uint32_t qpn;
    int opcode;             /* enum ibv_wr_opcode */
    unsigned send_flags;    /* IBV_SEND_* */
    int num_sge;
    uint64_t sge_addr;
    uint32_t sge_length;
    uint32_t sge_lkey;
    uint64_t remote_addr;
    uint32_t rkey;
    uint32_t imm_data;      /* as posted: network byte order */
} afmesh_verbs_emu_posted;

/** How many times ibv_post_send has been called, on any QP. */
uint64_t afmesh_verbs_emu_post_send_calls(void);
/**
 * The chain of the latest ibv_post_send call, every request of it (taken
 * or refused), up to `max` into `out`; returns its length.
 */
size_t afmesh_verbs_emu_last_chain(afmesh_verbs_emu_posted *out, size_t max);
/**
 * Makes the next ibv_post_send refuse its request number `index` (0: the
 * first) with `error`, as hardware may refuse a chain part way: the
 * requests before it are posted and executed, `bad` points at it.
 */
void afmesh_verbs_emu_refuse_post_send(uint32_t index, int error);

#ifdef __cplusplus
}
#endif
