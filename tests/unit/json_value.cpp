// SPDX-License-Identifier: Apache-2.0
#include "json_value.h"

#include <cstdlib>
#include <cstring>

namespace afmesh::test {
namespace {

class Parser {
public:
    explicit Parser(std::string_view text) : text_(text) {}

    std::optional<JsonValue> document(std::string *error) {
        JsonValue value;
        skip_space();
        if (parse_value(value)) {
            skip_space();
            if (pos_ == text_.size()) return value;
            fail("trailing characters after the document");
        }
        *error = error_ + " at byte " + std::to_string(pos_);
        return std::nullopt;
    }

private:
    bool fail(const char *what) {
        if (error_.empty()) error_ = what;
        return false;
    }
    bool at_end() const { return pos_ >= text_.size(); }
    char peek() const { return at_end() ? '\0' : text_[pos_]; }
    void skip_space() {
        while (!at_end() && strchr(" \t\r\n", text_[pos_]) != nullptr) ++pos_;
    }
    bool consume(char c) {
        if (peek() != c) return false;
        ++pos_;
        return true;
    }
    bool literal(std::string_view word) {
        if (text_.substr(pos_, word.size()) != word) return fail("invalid literal");
        pos_ += word.size();
        return true;
    }

    bool parse_value(JsonValue &out) {
        switch (peek()) {
        case '{': return parse_object(out);
        case '[': return parse_array(out);
        case '"': out.type = JsonValue::Type::kString; return parse_string(out.string);
        case 't': out.type = JsonValue::Type::kBool; out.boolean = true; return literal("true");
        case 'f': out.type = JsonValue::Type::kBool; out.boolean = false; return literal("false");
        case 'n': out.type = JsonValue::Type::kNull; return literal("null");
        default: return parse_number(out);
        }
    }

    bool parse_object(JsonValue &out) {
        out.type = JsonValue::Type::kObject;
        ++pos_;  // '{'
        skip_space();
        if (consume('}')) return true;
        do {
            skip_space();
            std::string key;
            if (peek() != '"') return fail("expected a member name");
            if (!parse_string(key)) return false;
            skip_space();
            if (!consume(':')) return fail("expected ':'");
            skip_space();
            JsonValue value;
            if (!parse_value(value)) return false;
            value.key = std::move(key);
            out.members.push_back(std::move(value));
            skip_space();
        } while (consume(','));
        return consume('}') || fail("expected ',' or '}'");
    }

    bool parse_array(JsonValue &out) {
        out.type = JsonValue::Type::kArray;
        ++pos_;  // '['
        skip_space();
        if (consume(']')) return true;
        do {
            skip_space();
            JsonValue value;
            if (!parse_value(value)) return false;
            out.array.push_back(std::move(value));
            skip_space();
        } while (consume(','));
        return consume(']') || fail("expected ',' or ']'");
    }

    bool digits() {
        size_t start = pos_;
        while (peek() >= '0' && peek() <= '9') ++pos_;
        return pos_ > start;
    }

    // number = [-] (0 | [1-9][0-9]*) [. [0-9]+] [(e|E) [+|-] [0-9]+]
    bool parse_number(JsonValue &out) {
        size_t start = pos_;
        consume('-');
        if (!consume('0') && !(peek() >= '1' && peek() <= '9' && digits())) return fail("invalid value");
        if (consume('.') && !digits()) return fail("expected digits after '.'");
        if (consume('e') || consume('E')) {
            if (!consume('+')) consume('-');
            if (!digits()) return fail("expected exponent digits");
        }
        out.type = JsonValue::Type::kNumber;
        out.number = strtod(std::string(text_.substr(start, pos_ - start)).c_str(), nullptr);
        return true;
    }

    bool hex4(unsigned *code) {
        if (pos_ + 4 > text_.size()) return fail("truncated \\u escape");
        *code = 0;
        for (int i = 0; i < 4; ++i) {
            char c = text_[pos_++];
            int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                                       : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
            if (digit < 0) return fail("invalid \\u escape");
            *code = *code * 16 + static_cast<unsigned>(digit);
        }
        return true;
    }

    static void append_utf8(std::string &out, unsigned code) {
        if (code < 0x80) {
            out += static_cast<char>(code);
        } else if (code < 0x800) {
            out += static_cast<char>(0xC0 | (code >> 6));
            out += static_cast<char>(0x80 | (code & 0x3F));
        } else if (code < 0x10000) {
            out += static_cast<char>(0xE0 | (code >> 12));
            out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (code & 0x3F));
        } else {
            out += static_cast<char>(0xF0 | (code >> 18));
            out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
            out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (code & 0x3F));
        }
    }

    bool parse_escape(std::string &out) {
        char c = peek();
        ++pos_;
        switch (c) {
        case '"': out += '"'; return true;
        case '\\': out += '\\'; return true;
        case '/': out += '/'; return true;
        case 'b': out += '\b'; return true;
        case 'f': out += '\f'; return true;
        case 'n': out += '\n'; return true;
        case 'r': out += '\r'; return true;
        case 't': out += '\t'; return true;
        case 'u': break;
        default: return fail("invalid escape");
        }
        unsigned code = 0;
        if (!hex4(&code)) return false;
        if (code >= 0xD800 && code < 0xDC00) {  // a high surrogate needs its low half
            unsigned low = 0;
            if (!consume('\\') || !consume('u') || !hex4(&low) || low < 0xDC00 || low > 0xDFFF)
                return fail("unpaired surrogate");
            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
        } else if (code >= 0xDC00 && code <= 0xDFFF) {
            return fail("unpaired surrogate");
        }
        append_utf8(out, code);
        return true;
    }

    bool parse_string(std::string &out) {
        ++pos_;  // '"'
        while (!at_end()) {
            char c = text_[pos_++];
            if (c == '"') return true;
            if (static_cast<unsigned char>(c) < 0x20) return fail("unescaped control character in a string");
            if (c != '\\')
                out += c;
            else if (!parse_escape(out))
                return false;
        }
        return fail("unterminated string");
    }

    std::string_view text_;
    size_t pos_ = 0;
    std::string error_;
};

}  // namespace

const JsonValue *JsonValue::find(std::string_view wanted) const {
    for (const JsonValue &member : members)
        if (member.key == wanted) return &member;
    return nullptr;
}

std::optional<JsonValue> parse_json(std::string_view text, std::string *error) {
    return Parser(text).document(error);
}

}  // namespace afmesh::test
