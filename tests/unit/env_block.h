// SPDX-License-Identifier: Apache-2.0
// An environment block built by a test: "NAME=value" strings and the
// null-terminated char* array that Config::from_env and posix_spawn take,
// so tests never read or modify the real process environment.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

namespace afmesh::test {

class EnvBlock {
public:
    EnvBlock() = default;
    EnvBlock(std::initializer_list<std::string> entries) : entries_(entries) {}

    /** Adds one "NAME=value" entry. */
    EnvBlock &add(std::string entry) {
        entries_.push_back(std::move(entry));
        return *this;
    }

    /** The array form; valid until the next add() or the block's destruction. */
    char **envp() {
        pointers_.clear();
        for (std::string &entry : entries_) pointers_.push_back(entry.data());
        pointers_.push_back(nullptr);
        return pointers_.data();
    }

private:
    std::vector<std::string> entries_;
    std::vector<char *> pointers_;
};

}  // namespace afmesh::test
