// SPDX-License-Identifier: Apache-2.0
// A minimal streaming JSON writer (objects, arrays, strings, numbers,
// booleans, null) with correct string escaping, so tools need no third-party
// library. Pretty-prints with two-space indentation.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string_view>
#include <vector>

namespace afmesh::tool {

class JsonWriter {
public:
    explicit JsonWriter(FILE *out) : out_(out) {}

    JsonWriter &begin_object();
    JsonWriter &end_object();
    JsonWriter &begin_array();
    JsonWriter &end_array();
    /** Names the next value; only inside an object. */
    JsonWriter &key(std::string_view name);

    JsonWriter &string(std::string_view text);
    JsonWriter &number(int64_t value);
    JsonWriter &number(uint64_t value);
    JsonWriter &boolean(bool value);
    JsonWriter &null();

    /** Finishes the document with a newline; every object and array must be closed. */
    void finish();

private:
    void before_value();
    void open(char bracket);
    void close(char bracket);
    void newline_and_indent();

    FILE *out_;
    std::vector<bool> has_items_;  // one entry per open object/array
    bool after_key_ = false;
};

}  // namespace afmesh::tool
