// SPDX-License-Identifier: Apache-2.0
#include "elf_dynamic.h"

#include <elf.h>

#include <cstring>
#include <fstream>

namespace afmesh::testing {
namespace {

// Bounds-checked view of the file's bytes.
class Bytes {
public:
    explicit Bytes(std::vector<char> data) : data_(std::move(data)) {}
    template <class T>
    bool read(uint64_t offset, T *out) const {
        if (offset > data_.size() || data_.size() - offset < sizeof(T)) return false;
        memcpy(out, data_.data() + offset, sizeof(T));
        return true;
    }
    // The NUL-terminated string at `offset` of the string table section `table`.
    bool string_at(const Elf64_Shdr &table, uint64_t offset, std::string *out) const {
        if (offset >= table.sh_size || table.sh_offset > data_.size() || data_.size() - table.sh_offset < table.sh_size)
            return false;
        const char *begin = data_.data() + table.sh_offset + offset;
        const size_t max = table.sh_size - offset;
        *out = std::string(begin, strnlen(begin, max));
        return true;
    }

private:
    std::vector<char> data_;
};

bool section_entries(const Elf64_Shdr &section, size_t entry_size, uint64_t *count) {
    if (section.sh_entsize != entry_size) return false;
    *count = section.sh_size / entry_size;
    return true;
}

}  // namespace

bool read_elf_dynamic(const std::string &path, ElfDynamic *out, std::string *error) {
    std::ifstream file(path, std::ios::binary | std::ios::ate);
    std::vector<char> data(file ? static_cast<size_t>(file.tellg()) : 0);
    if (!file || !file.seekg(0).read(data.data(), static_cast<std::streamsize>(data.size()))) {
        *error = "cannot read " + path;
        return false;
    }
    Bytes bytes(std::move(data));
    Elf64_Ehdr header;
    if (!bytes.read(0, &header) || memcmp(header.e_ident, ELFMAG, SELFMAG) != 0) {
        *error = path + " is not an ELF file";
        return false;
    }
    if (header.e_ident[EI_CLASS] != ELFCLASS64 || header.e_ident[EI_DATA] != ELFDATA2LSB ||
        header.e_shentsize != sizeof(Elf64_Shdr)) {
        *error = path + " is not a 64-bit little-endian ELF file";
        return false;
    }
    std::vector<Elf64_Shdr> sections(header.e_shnum);
    for (size_t i = 0; i < sections.size(); ++i) {
        if (!bytes.read(header.e_shoff + i * sizeof(Elf64_Shdr), &sections[i])) {
            *error = path + ": section header " + std::to_string(i) + " is out of bounds";
            return false;
        }
    }
    *out = {};
    for (const Elf64_Shdr &section : sections) {
        if (section.sh_type != SHT_DYNAMIC && section.sh_type != SHT_DYNSYM) continue;
        if (section.sh_link >= sections.size()) continue;
        const Elf64_Shdr &strings = sections[section.sh_link];
        uint64_t count = 0;
        if (section.sh_type == SHT_DYNAMIC && section_entries(section, sizeof(Elf64_Dyn), &count)) {
            for (uint64_t i = 0; i < count; ++i) {
                Elf64_Dyn entry;
                std::string name;
                if (!bytes.read(section.sh_offset + i * sizeof entry, &entry) || entry.d_tag == DT_NULL) break;
                if (entry.d_tag == DT_NEEDED && bytes.string_at(strings, entry.d_un.d_val, &name))
                    out->needed.push_back(name);
            }
        } else if (section.sh_type == SHT_DYNSYM && section_entries(section, sizeof(Elf64_Sym), &count)) {
            for (uint64_t i = 1; i < count; ++i) {  // entry 0 is the null symbol
                Elf64_Sym symbol;
                std::string name;
                if (!bytes.read(section.sh_offset + i * sizeof symbol, &symbol)) break;
                const unsigned binding = ELF64_ST_BIND(symbol.st_info), type = ELF64_ST_TYPE(symbol.st_info);
                if (symbol.st_shndx == SHN_UNDEF || (binding != STB_GLOBAL && binding != STB_WEAK)) continue;
                if (ELF64_ST_VISIBILITY(symbol.st_other) != STV_DEFAULT) continue;
                if (type == STT_SECTION || type == STT_FILE) continue;
                if (bytes.string_at(strings, symbol.st_name, &name)) out->exported.push_back(name);
            }
        }
    }
    return true;
}

}  // namespace afmesh::testing
