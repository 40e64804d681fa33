// SPDX-License-Identifier: Apache-2.0
#include "exclude_list.h"

#include <algorithm>
#include <fstream>

namespace afmesh::test {
namespace {

constexpr std::string_view kBlanks = " \t\r";  // \r: a file saved with CRLF line ends reads the same

std::string_view trim(std::string_view text) {
    const size_t begin = text.find_first_not_of(kBlanks);
    if (begin == std::string_view::npos) return {};
    return text.substr(begin, text.find_last_not_of(kBlanks) - begin + 1);
}

}  // namespace

bool matches_pattern(std::string_view pattern, std::string_view name) {
    // Greedy matching with one backtrack point: on a mismatch, the latest `*`
    // takes one more character of the name and matching resumes after it.
    size_t p = 0, n = 0;
    size_t star = std::string_view::npos, star_n = 0;
    while (n < name.size()) {
        if (p < pattern.size() && pattern[p] == '*') {
            star = p++;
            star_n = n;
        } else if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == name[n])) {
            ++p;
            ++n;
        } else if (star != std::string_view::npos) {
            p = star + 1;
            n = ++star_n;
        } else {
            return false;
        }
    }
    while (p < pattern.size() && pattern[p] == '*') ++p;
    return p == pattern.size();
}

std::string ExcludeEntry::where() const { return file + ":" + std::to_string(line); }

std::string ExcludeEntry::skip_message() const {
    const size_t base = file.find_last_of('/') + 1;  // npos + 1 == 0: no directory
    const std::string provider = file.substr(base, file.find('.', base) - base);
    return "excluded on " + provider + ": " + reason + " (" + where() + ")";
}

Status ExcludeList::parse(std::istream &in, const std::string &file) {
    std::vector<ExcludeEntry> read;
    std::string text;
    for (int line = 1; std::getline(in, text); ++line) {
        const std::string_view entry = trim(text);
        if (entry.empty() || entry.front() == '#') continue;
        const size_t blank = entry.find_first_of(kBlanks);
        const std::string_view reason = blank == std::string_view::npos ? "" : trim(entry.substr(blank));
        if (reason.empty())
            return Status(Code::kInvalidArgument, file + ":" + std::to_string(line) + ": '" + std::string(entry) +
                                                      "' gives no reason; an entry is '<gtest name pattern> <reason>'");
        read.push_back({std::string(entry.substr(0, blank)), std::string(reason), file, line});
    }
    if (in.bad()) return Status(Code::kError, file + ": reading failed after " + std::to_string(read.size()) + " entries");
    entries_.insert(entries_.end(), read.begin(), read.end());
    return Status::ok();
}

Status ExcludeList::load(std::string_view files) {
    while (!files.empty()) {
        const size_t colon = files.find(':');
        const std::string file(files.substr(0, colon));
        files = colon == std::string_view::npos ? std::string_view{} : files.substr(colon + 1);
        if (file.empty()) continue;
        std::ifstream in(file);
        if (!in) return Status(Code::kNotFound, file + ": cannot be opened");
        Status s = parse(in, file);
        if (!s) return s;
    }
    return Status::ok();
}

const ExcludeEntry *ExcludeList::match(std::string_view test) const {
    const auto it = std::find_if(entries_.begin(), entries_.end(),
                                 [&](const ExcludeEntry &e) { return matches_pattern(e.pattern, test); });
    return it == entries_.end() ? nullptr : &*it;
}

std::vector<const ExcludeEntry *> ExcludeList::unmatched(const std::vector<std::string> &tests) const {
    std::vector<const ExcludeEntry *> out;
    for (const ExcludeEntry &e : entries_)
        if (std::none_of(tests.begin(), tests.end(), [&](const std::string &t) { return matches_pattern(e.pattern, t); }))
            out.push_back(&e);
    return out;
}

}  // namespace afmesh::test
