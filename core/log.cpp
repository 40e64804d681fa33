// SPDX-License-Identifier: Apache-2.0
#include "log.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <new>


namespace afmesh {
namespace {

std::atomic<int> g_level{AFMESH_LOG_WARN};
thread_local std::string t_module_error;

constexpr const char *kLevelNames[] = {"error", "warn", "info", "debug", "trace"};

// The identity and the handler are read by any thread that logs, without a
// lock, while another thread may replace them. Each value is therefore an
// immutable heap entry published through an atomic pointer, and a replaced
// entry is never freed: a logging thread may still hold it, and nothing
// tells when it lets go. Every entry links the one it replaced, so all stay
// reachable (LeakSanitizer sees no leak); the cost is a few dozen bytes per
// set call, and programs set both once at start-up, or once per node.

struct Identity {
    char text[64];  // "worker 0", "scheduler"; "" when none
    const Identity *older;
};

struct Handler {
    afmesh_log_handler fn;  // null: stderr
    void *user;
    const Handler *older;
};

std::atomic<const Identity *> g_identity{nullptr};
std::atomic<const Handler *> g_handler{nullptr};

// Makes `fresh` the current entry of `slot`, linked to the one it replaces.
// The CAS (not a plain exchange) stores `older` before `fresh` is published,
// so racing setters still leave one unbroken chain.
template <class Entry>
void publish(std::atomic<const Entry *> &slot, Entry *fresh) {
    fresh->older = slot.load(std::memory_order_relaxed);
    while (!slot.compare_exchange_weak(fresh->older, fresh, std::memory_order_release, std::memory_order_relaxed)) {
    }
}

// One log line being built; text beyond the buffer is cut off.
class Line {
public:
    void append(const char *fmt, ...) __attribute__((format(printf, 2, 3))) {
        va_list ap;
        va_start(ap, fmt);
        vappend(fmt, ap);
        va_end(ap);
    }

    void vappend(const char *fmt, va_list ap) {
        const int n = vsnprintf(buf_ + len_, sizeof buf_ - len_, fmt, ap);
        if (n > 0) len_ = std::min(len_ + static_cast<size_t>(n), sizeof buf_ - 1);
    }

    // UTC, microseconds: "2026-12-06T17:52:27.123456Z".
    void append_timestamp() {
        timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        tm utc;
        gmtime_r(&now.tv_sec, &utc);
        len_ += strftime(buf_ + len_, sizeof buf_ - len_, "%Y-%m-%dT%H:%M:%S", &utc);
        append(".%06ldZ", static_cast<long>(now.tv_nsec / 1000));
    }

    const char *c_str() const { return buf_; }  // vsnprintf keeps it terminated

    // One write per line keeps lines from different threads and processes whole.
    void write_to_stderr() {
        buf_[len_] = '\n';  // replaces the terminator; len_ < sizeof buf_ always
        ssize_t ignored = write(STDERR_FILENO, buf_, len_ + 1);
        (void)ignored;
    }

private:
    char buf_[2048] = "";
    size_t len_ = 0;
};

const char *level_name(int level) {
    return level >= 0 && level < static_cast<int>(std::size(kLevelNames)) ? kLevelNames[level] : "?";
}

void deliver(int level, Line &line) {
    const Handler *handler = g_handler.load(std::memory_order_acquire);
    if (handler && handler->fn)
        handler->fn(level, line.c_str(), handler->user);
    else
        line.write_to_stderr();
}

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

void set_log_identity(const char *role, int32_t rank) {
    Identity wanted{};
    if (role && *role) {
        if (rank < 0)
            snprintf(wanted.text, sizeof wanted.text, "%s", role);
        else
            snprintf(wanted.text, sizeof wanted.text, "%s %d", role, static_cast<int>(rank));
    }
    // Each node created sets the identity; an unchanged one adds no entry.
    const Identity *current = g_identity.load(std::memory_order_acquire);
    if (current ? strcmp(current->text, wanted.text) == 0 : wanted.text[0] == '\0') return;
    auto *fresh = new (std::nothrow) Identity(wanted);
    if (fresh) publish(g_identity, fresh);  // out of memory: lines keep the old identity
}

bool set_log_handler(afmesh_log_handler handler, void *user) {
    // The pair is one entry, so no line ever sees the new handler with the old user pointer.
    auto *fresh = new (std::nothrow) Handler{handler, user, nullptr};
    if (!fresh) return false;
    publish(g_handler, fresh);
    return true;
}

void log(int level, const char *source, const char *fmt, ...) {
    if (level > g_level.load(std::memory_order_relaxed)) return;
    Line line;
    line.append_timestamp();
    line.append(" afmesh[%d] ", static_cast<int>(getpid()));
    const Identity *identity = g_identity.load(std::memory_order_acquire);
    if (identity && identity->text[0]) line.append("%s ", identity->text);
    line.append("%s %s: ", level_name(level), source ? source : "module");
    va_list ap;
    va_start(ap, fmt);
    line.vappend(fmt, ap);
    va_end(ap);
    deliver(level, line);
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


