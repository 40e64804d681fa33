// SPDX-License-Identifier: Apache-2.0
#include "mailbox.h"

#include <cstring>

#include "byte_codec.h"

namespace afmesh {

Mailbox::Mailbox(MemoryRegistry &registry, uint32_t entries)
    : registry_(registry),
      entries_(entries),
      memory_(static_cast<uint8_t *>(calloc(size_t{2} * entries, kSlotBytes))) {}

Status Mailbox::create(MemoryRegistry &registry, uint32_t entries, std::unique_ptr<Mailbox> *out) {
    std::unique_ptr<Mailbox> mailbox(new Mailbox(registry, entries));
    if (!mailbox->memory_) return {Code::kNoMemory, "no memory for a mailbox of " + std::to_string(entries) + " entries"};
    if (Status s = registry.add(mailbox->memory_.get(), size_t{2} * entries * kSlotBytes, AFMESH_MEM_HOST, -1,
                                &mailbox->registration_);
        !s)
        return {s.code(), "registering a mailbox: " + s.message()};
    *out = std::move(mailbox);
    return Status::ok();
}

Mailbox::~Mailbox() {
    if (registration_) (void)registry_.remove(registration_);
}

wire::MailboxAddress Mailbox::address() const {
    wire::MailboxAddress a;
    a.rkey = registration_->rkey;
    a.offset = registration_->offset_of(reinterpret_cast<uintptr_t>(incoming(0)));
    a.entries = entries_;
    return a;
}

afmesh_net_write_seg Mailbox::stage(uint32_t entry, const std::vector<uint8_t> &message,
                                    const wire::MailboxAddress &peer) {
    uint8_t *slot = outgoing(entry);
    const auto len = static_cast<uint32_t>(message.size());
    store_le32(slot, len);
    memcpy(slot + 4, message.data(), len);
    afmesh_net_write_seg seg{};
    seg.src = slot;
    seg.src_mr = registration_->mr;
    seg.bytes = 4 + len;
    seg.dst = &peer.rkey;
    seg.dst_offset = peer.offset + uint64_t{entry} * kSlotBytes;
    return seg;
}

Status Mailbox::read(uint32_t entry, const uint8_t **data, size_t *len) const {
    if (entry >= entries_)
        return {Code::kPeerFailed, "carrier names mailbox entry " + std::to_string(entry) + " of " +
                                       std::to_string(entries_)};
    const uint8_t *slot = incoming(entry);
    const uint32_t n = load_le32(slot);
    if (n == 0 || n > kMaxMessageBytes)
        return {Code::kPeerFailed, "mailbox entry " + std::to_string(entry) + " holds " + std::to_string(n) +
                                       " bytes (at most " + std::to_string(kMaxMessageBytes) + ")"};
    *data = slot + 4;
    *len = n;
    return Status::ok();
}

void MailboxEntries::reset(uint32_t count) {
    free_.clear();
    // Taken from the back: the lowest first.
    for (uint32_t e = count; e > 0; --e) free_.push_back(static_cast<uint16_t>(e - 1));
}

int32_t MailboxEntries::take() {
    if (free_.empty()) return -1;
    const uint16_t entry = free_.back();
    free_.pop_back();
    return entry;
}

void MailboxEntries::give_back(int32_t entry) { free_.push_back(static_cast<uint16_t>(entry)); }

}  // namespace afmesh
