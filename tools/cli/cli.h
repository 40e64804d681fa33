// SPDX-License-Identifier: Apache-2.0
// The command-line conventions every afmesh program shares, on CLI11: how
// numbers and byte sizes are read, and what a bad command line does (exit 2
// with one line saying why and the usage; never an abort).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>

namespace afmesh::cli {

/** Exit statuses shared by every afmesh program. */
constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;  // the program ran and found a problem
constexpr int kExitUsage = 2;    // the command line itself is wrong

/**
 * Reads a byte size: decimal digits with an optional binary suffix, K or
 * KiB, M or MiB, G or GiB (any case): "8", "4K", "64KiB", "1M". Anything
 * else ("3x", "-1", "0x10", "1.5K", a size past 2^64) is nullopt.
 */
std::optional<uint64_t> parse_byte_size(std::string_view text);

/**
 * A transform for numeric options: decimal digits only, so "3x", "1e3", "0x10"
 * and "-3" are refused where the C library would read 3, 1000, 16 or a huge
 * number. Leading zeros are read as decimal ("010" is ten), not octal.
 */
const CLI::Validator &whole_number();

/** A transform for size options: rewrites "64K" to "65536" (parse_byte_size), refusing what it cannot read. */
const CLI::Validator &byte_size();

/** A check for real-number options: a finite number of zero or more ("nan", "inf", "-1" refused). */
const CLI::Validator &non_negative_real();

/**
 * Declares a count option: a whole number (whole_number()) from `least` to
 * `most`, shown as N with its default in the help.
 */
template <class T>
CLI::Option *add_count(CLI::App &app, const std::string &name, T &value, const std::string &help, T least = 0,
                       T most = std::numeric_limits<T>::max()) {
    return app.add_option(name, value, help)
        ->capture_default_str()
        ->type_name("N")
        ->transform(whole_number())
        ->check(CLI::Range(least, most).description(""));
}

/**
 * Parses argv into `app` (argv[0] is the program). Returns nullopt when the
 * command line parsed and the program should go on; otherwise the exit
 * status to return: 0 after printing the help or version that was asked
 * for, 2 after printing to stderr the command's name, the reason in one
 * line, its usage line and where to find its options.
 */
std::optional<int> parse(CLI::App &app, int argc, const char *const *argv);

/** Prints, as parse() does for a bad command line, `command`'s name, `reason` and its usage; returns 2. */
int usage_error(const CLI::App &command, const std::string &reason);

}  // namespace afmesh::cli
