// SPDX-License-Identifier: Apache-2.0
#include "crypto.h"

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include <string>

namespace afmesh::crypto {

namespace {

std::string last_error() {
    char reason[256];
    ERR_error_string_n(ERR_get_error(), reason, sizeof reason);
    return reason;
}

}  // namespace

Status random_bytes(std::span<uint8_t> out) {
    if (RAND_bytes(out.data(), static_cast<int>(out.size())) != 1)
        return {Code::kError, "no random bytes from OpenSSL: " + last_error()};
    return Status::ok();
}

Status hmac(const Key &key, std::initializer_list<std::span<const uint8_t>> parts, Mac *out) {
    // The streaming interface (EVP_MAC, OpenSSL 3) takes the parts as they
    // are, where the one-shot HMAC() would need them copied together.
    EVP_MAC *algorithm = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
    EVP_MAC_CTX *ctx = algorithm ? EVP_MAC_CTX_new(algorithm) : nullptr;
    char digest[] = "SHA256";
    const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string("digest", digest, 0), OSSL_PARAM_construct_end()};
    size_t length = 0;
    bool ok = ctx && EVP_MAC_init(ctx, key.data(), key.size(), params) == 1;
    for (std::span<const uint8_t> part : parts) ok = ok && EVP_MAC_update(ctx, part.data(), part.size()) == 1;
    ok = ok && EVP_MAC_final(ctx, out->data(), &length, out->size()) == 1 && length == out->size();
    EVP_MAC_CTX_free(ctx);
    EVP_MAC_free(algorithm);
    if (!ok) return {Code::kError, "OpenSSL cannot compute HMAC-SHA256: " + last_error()};
    return Status::ok();
}

bool equal(const Mac &a, const Mac &b) { return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0; }

const char *describe() {
    static const std::string text = std::string("HMAC-SHA256, ") + OpenSSL_version(OPENSSL_VERSION);
    return text.c_str();
}

}  // namespace afmesh::crypto
