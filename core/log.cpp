#include "log.h"

#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace afmesh {
namespace {

std::atomic<int> g_level{AFMESH_LOG_WARN};
thread_local std::string t_module_error;

constexpr const char *kLevelNames[] = {"error", "warn", "info", "debug", "trace"};

}  // namespace

afmesh_log_level log_level() { return static_cast<afmesh_log_level>(g_level.load(std::memory_order_relaxed)); }

void set_log_level(afmesh_log_level level) { g_level.store(level, std::memory_order_relaxed); }

bool parse_log_level(const char *name, afmesh_log_level *level) {
    for (int i = 0; i < static_cast<int>(std::size(kLevelNames)); ++i) {
        if (strcasecmp(name, kLevelNames[i]) == 0) {
            *level = static_cast<afmesh_log_level>(i);
            return true;
        }
    }
    return false;
}

void log(int level, const char *source, const char *fmt, ...) {
    if (level > g_level.load(std::memory_order_relaxed)) return;
    char line[2048];
    const char *level_name = level >= 0 && level < static_cast<int>(std::size(kLevelNames)) ? kLevelNames[level] : "?";
    int n = snprintf(line, sizeof line, "afmesh[%d] %s %s: ", static_cast<int>(getpid()), level_name,
                     source ? source : "module");
    va_list ap;
    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof line - n - 1, fmt, ap);
    va_end(ap);
    if (n > static_cast<int>(sizeof line) - 2) n = sizeof line - 2;
    line[n++] = '\n';
    // One write per line keeps lines from different threads and processes whole.
    ssize_t ignored = write(STDERR_FILENO, line, n);
    (void)ignored;
}

void set_module_error(const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    t_module_error = buf;
}

std::string take_module_error() {
    std::string out;
    out.swap(t_module_error);
    return out;
}

}  // namespace afmesh
