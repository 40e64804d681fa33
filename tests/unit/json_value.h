// SPDX-License-Identifier: Apache-2.0
// A strict little JSON parser for tests: checks that `afmesh info --json`
// writes valid JSON (RFC 8259) and lets tests inspect its structure.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace afmesh::test {

struct JsonValue {
    enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };

    Type type = Type::kNull;
    bool boolean = false;
    double number = 0;
    std::string string;
    std::vector<JsonValue> array;
    std::vector<JsonValue> members;  // an object's members, in document order, each with its key
    std::string key;                 // set on a member of an object

    /** The member called `wanted` of an object, or nullptr (also for non-objects). */
    const JsonValue *find(std::string_view wanted) const;
};

/**
 * Parses one complete JSON document (surrounding whitespace allowed).
 * Returns nullopt and sets *error (with the byte offset) when `text` is not
 * valid JSON.
 */
std::optional<JsonValue> parse_json(std::string_view text, std::string *error);

}  // namespace afmesh::test
