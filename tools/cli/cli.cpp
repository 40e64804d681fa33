// SPDX-License-Identifier: Apache-2.0
#include "cli.h"

#include <cmath>
#include <cstdio>
#include <string>

namespace afmesh::cli {
namespace {

bool all_digits(std::string_view text) {
    if (text.empty()) return false;
    for (char c : text)
        if (c < '0' || c > '9') return false;
    return true;
}

// Decimal digits to a number, or nullopt past 2^64 - 1.
std::optional<uint64_t> decimal(std::string_view digits) {
    uint64_t value = 0;
    for (char c : digits) {
        const uint64_t digit = static_cast<uint64_t>(c - '0');
        if (value > (UINT64_MAX - digit) / 10) return std::nullopt;
        value = value * 10 + digit;
    }
    return value;
}

bool same_ignoring_case(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if ((a[i] | 0x20) != (b[i] | 0x20)) return false;
    return true;
}

// The power of two a size suffix multiplies by, or -1 for an unknown suffix.
int suffix_shift(std::string_view suffix) {
    struct Unit {
        const char *letter;
        int shift;
    };
    for (Unit unit : {Unit{"", 0}, Unit{"K", 10}, Unit{"M", 20}, Unit{"G", 30}}) {
        const std::string short_form = unit.letter, iec_form = std::string(unit.letter) + "iB";
        if (same_ignoring_case(suffix, short_form) || (unit.shift && same_ignoring_case(suffix, iec_form)))
            return unit.shift;
    }
    return -1;
}

// The program's name and its chosen subcommands, as typed: "afmesh bench".
std::string command_path(const CLI::App &command) {
    const CLI::App *parent = command.get_parent();
    return parent ? command_path(*parent) + " " + command.get_name() : command.get_name();
}

// The subcommand the user was typing when parsing stopped.
const CLI::App &innermost_command(const CLI::App &app) {
    const std::vector<const CLI::App *> chosen = app.get_subcommands([](const CLI::App *) { return true; });
    for (const CLI::App *sub : chosen)
        if (sub->parsed()) return innermost_command(*sub);
    return app;
}

}  // namespace

std::optional<uint64_t> parse_byte_size(std::string_view text) {
    size_t digits = 0;
    while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
    const int shift = suffix_shift(text.substr(digits));
    const std::optional<uint64_t> count = digits ? decimal(text.substr(0, digits)) : std::nullopt;
    if (!count || shift < 0 || *count > (UINT64_MAX >> shift)) return std::nullopt;
    return *count << shift;
}

const CLI::Validator &whole_number() {
    static const CLI::Validator validator(
        [](std::string &text) -> std::string {
            if (!all_digits(text)) return "not a whole number: '" + text + "'";
            // CLI11 reads integers with strtoll base 0, where "010" is octal.
            const size_t first_significant = text.find_first_not_of('0');
            text = first_significant == std::string::npos ? "0" : text.substr(first_significant);
            return "";
        },
        "");
    return validator;
}

const CLI::Validator &byte_size() {
    static const CLI::Validator validator(
        [](std::string &text) -> std::string {
            const std::optional<uint64_t> bytes = parse_byte_size(text);
            if (!bytes) return "not a byte size: '" + text + "' (e.g. 8, 4K, 64KiB, 1M)";
            text = std::to_string(*bytes);
            return "";
        },
        "");
    return validator;
}

const CLI::Validator &non_negative_real() {
    static const CLI::Validator validator(
        [](std::string &text) -> std::string {
            double value = 0;
            const bool is_number = CLI::detail::lexical_cast(text, value);
            if (!is_number || !std::isfinite(value) || value < 0)
                return "not a number of zero or more: '" + text + "'";
            return "";
        },
        "");
    return validator;
}

std::optional<int> parse(CLI::App &app, int argc, const char *const *argv) {
    try {
        app.parse(argc, argv);
        return std::nullopt;
    } catch (const CLI::CallForHelp &) {
        fputs(app.help().c_str(), stdout);  // the innermost chosen subcommand's help
        return kExitOk;
    } catch (const CLI::CallForVersion &version) {
        printf("%s\n", version.what());
        return kExitOk;
    } catch (const CLI::ParseError &error) {
        return usage_error(innermost_command(app), error.what());
    }
}

int usage_error(const CLI::App &command, const std::string &reason) {
    const std::string name = command_path(command);
    // The command's own formatter carries its labels; make_usage is not on its base class.
    const auto formatter = std::dynamic_pointer_cast<CLI::Formatter>(command.get_formatter());
    const std::string usage = (formatter ? *formatter : CLI::Formatter()).make_usage(&command, name);
    fprintf(stderr, "%s: %s\n%sRun '%s --help' for its options.\n", name.c_str(), reason.c_str(), usage.c_str(),
            name.c_str());
    return kExitUsage;
}

}  // namespace afmesh::cli
