// SPDX-License-Identifier: Apache-2.0
#include "bench_options.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

namespace afmesh::bench {
namespace {

constexpr DType kDTypes[] = {
    {"bf16", {4, 16, 1}, 2}, {"fp16", {2, 16, 1}, 2}, {"fp32", {2, 32, 1}, 4}, {"fp8", {2, 8, 1}, 1},
    {"int8", {0, 8, 1}, 1},
};

bool parse_dtype(const char *name, DType *out) {
    for (const DType &d : kDTypes)
        if (!strcmp(d.name, name)) return *out = d, true;
    fprintf(stderr, "afmesh bench: unknown dtype '%s' (bf16, fp16, fp32, fp8, int8)\n", name);
    return false;
}

// A comma-separated list; false (having said why) when an item does not parse or there is none.
template <class T, class Parse>
bool parse_list(const char *flag, const char *text, std::vector<T> *out, Parse parse) {
    out->clear();
    std::string s = text;
    for (size_t start = 0; start <= s.size();) {
        size_t comma = s.find(',', start);
        if (comma == std::string::npos) comma = s.size();
        if (comma > start) {
            const std::string item = s.substr(start, comma - start);
            std::optional<T> value = parse(item);
            if (!value) {
                fprintf(stderr, "afmesh bench: %s: bad item '%s'\n", flag, item.c_str());
                return false;
            }
            out->push_back(std::move(*value));
        }
        start = comma + 1;
    }
    if (out->empty()) fprintf(stderr, "afmesh bench: %s needs at least one item\n", flag);
    return !out->empty();
}

std::optional<uint64_t> parse_size(const std::string &text) {
    char *end = nullptr;
    errno = 0;
    const unsigned long long v = strtoull(text.c_str(), &end, 10);
    if (errno || end == text.c_str() || *end || text[0] == '-') return std::nullopt;
    return v;
}

bool positive(const char *flag, long v) {
    if (v > 0) return true;
    fprintf(stderr, "afmesh bench: %s must be positive\n", flag);
    return false;
}

}  // namespace

bool parse_options(int argc, char *const *argv, Options *o) {
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
        auto takes = [&](const char *flag) {
            if (strcmp(a, flag) != 0) return false;
            if (!v) {
                fprintf(stderr, "afmesh bench: %s needs a value\n", flag);
                exit(2);
            }
            ++i;
            return true;
        };
        if (takes("--iters")) { if (!positive(a, o->iters = atoi(v))) return false; }
        else if (takes("--warmup")) o->warmup = atoi(v);
        else if (takes("--seconds")) o->seconds = atof(v);
        else if (takes("--tokens")) { if (!positive(a, o->tokens = atoi(v))) return false; }
        else if (takes("--hidden")) { if (!positive(a, o->hidden = atoi(v))) return false; }
        else if (takes("--dtype")) { if (!parse_dtype(v, &o->push_dtype)) return false; }
        else if (takes("--pull-dtype")) { if (!parse_dtype(v, &o->pull_dtype)) return false; }
        else if (takes("--microbatches")) { if (!positive(a, o->microbatches = atoi(v))) return false; }
        else if (takes("--layers")) { if (!positive(a, o->layers = atoi(v))) return false; }
        else if (takes("--sizes")) { if (!parse_list(a, v, &o->sizes, parse_size)) return false; }
        else if (takes("--poll")) {
            if (!parse_list(a, v, &o->polls, [](const std::string &x) { return std::optional<std::string>(x); }))
                return false;
        }
        else if (takes("--batch")) {
            if (!strcmp(v, "all")) o->batch = AFMESH_BATCH_ALL_WORKERS;
            else if (!strcmp(v, "any")) o->batch = AFMESH_BATCH_ANY;
            else {
                fprintf(stderr, "afmesh bench: --batch takes all or any\n");
                return false;
            }
        }
        else if (takes("--json")) o->json = v;
        else if (takes("--csv")) o->csv = v;
        else if (!strcmp(a, "--trace")) o->trace = true;
        else {
            fprintf(stderr, "afmesh bench: unknown option '%s'\n", a);
            return false;
        }
    }
    for (uint64_t s : o->sizes)
        if (s < 8 || s > (uint64_t{1} << 32) - 1) {
            fprintf(stderr, "afmesh bench: sizes must be between 8 bytes and 4 GiB\n");
            return false;
        }
    for (const std::string &p : o->polls)
        if (p != "busy" && p != "adaptive" && p != "blocking") {
            fprintf(stderr, "afmesh bench: --poll takes busy, adaptive and/or blocking\n");
            return false;
        }
    return true;
}

}  // namespace afmesh::bench
