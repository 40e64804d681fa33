// SPDX-License-Identifier: Apache-2.0
// Internal status type: a code plus a human-readable reason. The public C API
// (afmesh.h) maps it to afmesh_status and the per-thread last-error message.
#pragma once

#include <string>
#include <utility>

#include "afmesh/hal/module.h"

namespace afmesh {

/** Codes shared with the module ABI (afmesh_hal_status). */
enum class Code : int {
    kOk = AFMESH_HAL_OK,
    kAgain = AFMESH_HAL_AGAIN,
    kNotPresent = AFMESH_HAL_NOT_PRESENT,
    kError = AFMESH_HAL_ERROR,
    kUnsupportedVersion = AFMESH_HAL_UNSUPPORTED_VERSION,
    kInvalidArgument = AFMESH_HAL_INVALID_ARGUMENT,
    kNoMemory = AFMESH_HAL_NO_MEMORY,
    kNotSupported = AFMESH_HAL_NOT_SUPPORTED,
    kPeerFailed = AFMESH_HAL_PEER_FAILED,
    kAccess = AFMESH_HAL_ACCESS,
    kTimeout = AFMESH_HAL_TIMEOUT,
    kNotFound = -100,  // core-only codes start here
    kClosed = -101,    // a peer (or this node) stopped cleanly
};

/** Name of a code, e.g. "NOT_PRESENT". */
const char *code_name(Code code);

class [[nodiscard]] Status {
public:
    Status() = default;
    Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}
    static Status ok() { return {}; }

    bool is_ok() const { return code_ == Code::kOk; }
    explicit operator bool() const { return is_ok(); }
    Code code() const { return code_; }
    const std::string &message() const { return message_; }
    /** "CODE: message" for logs and errors. */
    std::string to_string() const;

private:
    Code code_ = Code::kOk;
    std::string message_;
};

}  // namespace afmesh
