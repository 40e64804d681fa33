// SPDX-License-Identifier: Apache-2.0
#include "status.h"

namespace afmesh {

const char *code_name(Code code) {
    switch (code) {
    case Code::kOk: return "OK";
    case Code::kAgain: return "AGAIN";
    case Code::kNotPresent: return "NOT_PRESENT";
    case Code::kError: return "ERROR";
    case Code::kUnsupportedVersion: return "UNSUPPORTED_VERSION";
    case Code::kInvalidArgument: return "INVALID_ARGUMENT";
    case Code::kNoMemory: return "NO_MEMORY";
    case Code::kNotSupported: return "NOT_SUPPORTED";
    case Code::kPeerFailed: return "PEER_FAILED";
    case Code::kAccess: return "ACCESS";
    case Code::kTimeout: return "TIMEOUT";
    case Code::kNotFound: return "NOT_FOUND";
    case Code::kClosed: return "CLOSED";
    }
    return "UNKNOWN";
}

std::string Status::to_string() const {
    if (message_.empty()) return code_name(code_);
    return std::string(code_name(code_)) + ": " + message_;
}

}  // namespace afmesh
