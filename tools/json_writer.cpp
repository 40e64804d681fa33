// SPDX-License-Identifier: Apache-2.0
#include "json_writer.h"

#include <cinttypes>

namespace afmesh::tool {

void JsonWriter::newline_and_indent() {
    fputc('\n', out_);
    for (size_t i = 0; i < has_items_.size(); ++i) fputs("  ", out_);
}

// Writes the separator a value needs: nothing after a key, else a comma
// (when the container already has items) and a new indented line.
void JsonWriter::before_value() {
    if (after_key_) {
        after_key_ = false;
        return;
    }
    if (has_items_.empty()) return;
    if (has_items_.back()) fputc(',', out_);
    has_items_.back() = true;
    newline_and_indent();
}

void JsonWriter::open(char bracket) {
    before_value();
    fputc(bracket, out_);
    has_items_.push_back(false);
}

void JsonWriter::close(char bracket) {
    bool had_items = has_items_.back();
    has_items_.pop_back();
    if (had_items) newline_and_indent();
    fputc(bracket, out_);
}

JsonWriter &JsonWriter::begin_object() {
    open('{');
    return *this;
}
JsonWriter &JsonWriter::end_object() {
    close('}');
    return *this;
}
JsonWriter &JsonWriter::begin_array() {
    open('[');
    return *this;
}
JsonWriter &JsonWriter::end_array() {
    close(']');
    return *this;
}

JsonWriter &JsonWriter::key(std::string_view name) {
    string(name);
    fputs(": ", out_);
    after_key_ = true;
    return *this;
}

JsonWriter &JsonWriter::string(std::string_view text) {
    before_value();
    fputc('"', out_);
    for (char ch : text) {
        unsigned char c = static_cast<unsigned char>(ch);
        switch (c) {
        case '"': fputs("\\\"", out_); break;
        case '\\': fputs("\\\\", out_); break;
        case '\n': fputs("\\n", out_); break;
        case '\r': fputs("\\r", out_); break;
        case '\t': fputs("\\t", out_); break;
        case '\b': fputs("\\b", out_); break;
        case '\f': fputs("\\f", out_); break;
        default:
            // Other control characters have no short form; bytes >= 0x80 are
            // passed through as the UTF-8 they (normally) are.
            if (c < 0x20)
                fprintf(out_, "\\u%04x", c);
            else
                fputc(c, out_);
        }
    }
    fputc('"', out_);
    return *this;
}

JsonWriter &JsonWriter::number(int64_t value) {
    before_value();
    fprintf(out_, "%" PRId64, value);
    return *this;
}

JsonWriter &JsonWriter::number(uint64_t value) {
    before_value();
    fprintf(out_, "%" PRIu64, value);
    return *this;
}

JsonWriter &JsonWriter::boolean(bool value) {
    before_value();
    fputs(value ? "true" : "false", out_);
    return *this;
}

JsonWriter &JsonWriter::null() {
    before_value();
    fputs("null", out_);
    return *this;
}

void JsonWriter::finish() { fputc('\n', out_); }

}  // namespace afmesh::tool
