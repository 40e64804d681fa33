// SPDX-License-Identifier: Apache-2.0
// A node's mailbox for one peer: registered memory the peer writes small
// messages into (a worker's REQUESTs at a server, a server's RESPONSEs at a
// worker), each with the last tensor write of the exchange it describes.
// With a gathered write (transport ABI 1.2 write_imm_v) the tensor and its
// message then reach the peer in one transport operation, where a separate
// send would be a second one: on a provider like shm every operation costs
// a round of its locks, and at 64 KiB that second operation is a third of
// a push-pull.
//
// Entries are numbered; the worker hands one out per REQUEST and the
// server answers into the worker's entry of the same number, so both
// sides' entry k are free again once the worker has read the RESPONSE.
// Each entry holds one message behind its length (u32, little endian). The
// memory also holds as many entries for staging outgoing messages: the
// source of a gathered write must be registered, and must stay unchanged
// until the exchange ends.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "engine/wire.h"
#include "memory_registry.h"
#include "status.h"

namespace afmesh {

class Mailbox {
public:
    /** One entry: a message of up to kSlotBytes - 4 bytes behind its length. */
    static constexpr uint32_t kSlotBytes = 1024;
    static constexpr uint32_t kMaxMessageBytes = kSlotBytes - 4;

    /** Allocates and registers `entries` incoming and as many outgoing entries. */
    static Status create(MemoryRegistry &registry, uint32_t entries, std::unique_ptr<Mailbox> *out);
    ~Mailbox();
    Mailbox(const Mailbox &) = delete;
    Mailbox &operator=(const Mailbox &) = delete;

    uint32_t entries() const { return entries_; }
    /** What the peer needs to write into the incoming entries. */
    wire::MailboxAddress address() const;
    /**
     * Copies `message` into outgoing entry `entry` behind its length and
     * returns the segment of a gathered write that puts it into the peer's
     * entry of the same number (`peer` is the peer's address; the segment
     * points into it). Requires message.size() <= kMaxMessageBytes and
     * entry < both mailboxes' entries.
     */
    afmesh_net_write_seg stage(uint32_t entry, const std::vector<uint8_t> &message, const wire::MailboxAddress &peer);
    /** The message in incoming entry `entry`, checked against the entry's bounds. */
    Status read(uint32_t entry, const uint8_t **data, size_t *len) const;

private:
    Mailbox(MemoryRegistry &registry, uint32_t entries);
    uint8_t *incoming(uint32_t entry) const { return memory_.get() + size_t{entry} * kSlotBytes; }
    uint8_t *outgoing(uint32_t entry) const { return incoming(entries_ + entry); }

    struct FreeMemory {
        void operator()(uint8_t *memory) const { free(memory); }
    };

    MemoryRegistry &registry_;
    const uint32_t entries_;
    // calloc'd: an allocation this size is the kernel's zero pages, faulted
    // in only where entries are used. Zeroing it up front made start-up
    // grow with peers squared: 3 GiB written across a 192 x 64 cluster.
    std::unique_ptr<uint8_t, FreeMemory> memory_;
    const Registration *registration_ = nullptr;
};

/** The entries of a peer's mailbox not in use: handed out lowest first. */
class MailboxEntries {
public:
    /** Makes entries [0, count) free. */
    void reset(uint32_t count);
    /** A free entry, or -1 when every one is in use (or there is no mailbox). */
    int32_t take();
    void give_back(int32_t entry);

private:
    std::vector<uint16_t> free_;
};

}  // namespace afmesh
