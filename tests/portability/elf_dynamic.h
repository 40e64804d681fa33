// SPDX-License-Identifier: Apache-2.0
// A minimal reader of what the dynamic linker sees in an ELF file: its
// NEEDED libraries and the symbols it exports. Enough for the portability
// tests, without depending on binutils being installed.
#pragma once

#include <string>
#include <vector>

namespace afmesh::testing {

struct ElfDynamic {
    std::vector<std::string> needed;    // DT_NEEDED entries, in order
    std::vector<std::string> exported;  // defined global/weak symbols of .dynsym with default visibility
};

/** Reads `path` (64-bit little-endian ELF). False with `error` set when it cannot. */
bool read_elf_dynamic(const std::string &path, ElfDynamic *out, std::string *error);

}  // namespace afmesh::testing
