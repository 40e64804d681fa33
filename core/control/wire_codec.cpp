// SPDX-License-Identifier: Apache-2.0
#include "control/wire_codec.h"

namespace afmesh::control {

std::vector<uint8_t> WireReader::bytes(const char *field, size_t max_bytes) {
    if (!ok()) return {};
    // Peek at the length so an over-limit string is told apart from a truncated one.
    ByteReader peek = in_;
    uint32_t length = peek.u32();
    if (peek.ok() && length > max_bytes) {
        fail(field, "is " + std::to_string(length) + " bytes, over its limit of " + std::to_string(max_bytes));
        return {};
    }
    return check(in_.bytes(max_bytes), field);
}

std::string WireReader::str(const char *field, size_t max_bytes) {
    std::vector<uint8_t> raw = bytes(field, max_bytes);
    return {raw.begin(), raw.end()};
}

uint32_t WireReader::count(const char *field, size_t min_element_bytes) {
    uint32_t n = u32(field);
    if (ok() && min_element_bytes > 0 && n > in_.remaining() / min_element_bytes) {
        fail(field, "claims " + std::to_string(n) + " elements; the " + std::to_string(in_.remaining()) +
                        " bytes left cannot hold them");
        return 0;
    }
    return ok() ? n : 0;
}

void WireReader::fail(const char *field, const std::string &reason) {
    if (ok()) error_ = std::string("malformed ") + what_ + ": field '" + field + "' " + reason;
}

Status WireReader::finish() const {
    if (!ok()) return {Code::kInvalidArgument, error_};
    if (in_.remaining() != 0) {
        return {Code::kInvalidArgument,
                std::string("malformed ") + what_ + ": " + std::to_string(in_.remaining()) + " unexpected trailing bytes"};
    }
    return Status::ok();
}

}  // namespace afmesh::control
