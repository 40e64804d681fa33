// SPDX-License-Identifier: Apache-2.0
// Exclude files, the libfabric fabtests way: tests known to fail on one
// provider are listed with the reason in a file per provider
// (tests/conformance/excludes/), and the test runner skips them with that
// reason, so the report shows every gap and why instead of hiding it in a
// filter string.
//
// Format, line by line: blank lines and lines starting with '#' are ignored;
// every other line is `<pattern> <reason...>`, the pattern a full GoogleTest
// name (Suite.Test, with any instantiation prefix and parameter suffix) where
// `*` matches any run of characters and `?` any one, as in --gtest_filter,
// the reason the rest of the line after blanks. A line with no reason is an
// error, so that no test is ever skipped without one.
#pragma once

#include <istream>
#include <string>
#include <string_view>
#include <vector>

#include "status.h"

namespace afmesh::test {

/**
 * The environment variable naming the exclude files of a run, ':'-separated.
 * Not AFMESH_*: the library warns about every AFMESH_ variable it does not know.
 */
inline constexpr const char *kExcludeVariable = "CONFORMANCE_EXCLUDE";

/** Whether `name` matches `pattern` as a --gtest_filter pattern does (`*` and `?`, nothing else special). */
bool matches_pattern(std::string_view pattern, std::string_view name);

/** One excluded pattern and where it was read. */
struct ExcludeEntry {
    std::string pattern;
    std::string reason;
    std::string file;  // as it was named
    int line = 0;

    /** "file:line", for messages. */
    std::string where() const;
    /** "excluded on <provider>: <reason> (<file>:<line>)"; the provider is the file's name up to its first '.'. */
    std::string skip_message() const;
};

class ExcludeList {
public:
    /** Appends the entries of one file's text; `file` names it in messages. Adds nothing on an error, which names file:line. */
    Status parse(std::istream &in, const std::string &file);
    /** Reads each file of a ':'-separated list (empty items are ignored); a file that cannot be read is an error. */
    Status load(std::string_view files);

    const std::vector<ExcludeEntry> &entries() const { return entries_; }
    /** The first entry (in file, then line order) whose pattern matches `test`, or nullptr. */
    const ExcludeEntry *match(std::string_view test) const;
    /** The entries whose pattern matches none of `tests`. */
    std::vector<const ExcludeEntry *> unmatched(const std::vector<std::string> &tests) const;

private:
    std::vector<ExcludeEntry> entries_;
};

}  // namespace afmesh::test
