// SPDX-License-Identifier: Apache-2.0
// afmesh-transport-bench: round trips of write_imm through a transport
// module, next to the floor measured in the same run: for the fabric
// module, the same ping-pong written directly against libfabric with the
// provider AFMESH_FABRIC_PROVIDER names (fabric_floor.h); for any other,
// a plain blocking TCP socket ping-pong of the same sizes. One thread per
// side on loopback, ephemeral ports only.
//
//   afmesh-transport-bench [--transport NAME] [--sizes 8,64K,8M] [--iters N] [--warmup N]
//                          [--poll busy|wait]
//
// --poll busy spins on poll() (the lowest latency on idle cores); --poll
// wait sleeps on the module's wait fd between polls (arm() + poll(2)), as
// the core's adaptive and blocking modes do on a shared machine.
//
// A round trip is: ping writes `size` bytes into pong's region with an
// immediate; pong, on that immediate, writes `size` bytes back into ping's
// region with the same immediate; ping sees it. RTT percentiles are in
// microseconds; bandwidth is size / (p50 RTT / 2), the one-way rate.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cli.h"
#include "fabric_floor.h"
#include "log.h"
#include "module_loader.h"

namespace afmesh::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kRoundTripLimit = std::chrono::seconds(30);

struct Options {
    std::string transport = "tcp";
    std::vector<size_t> sizes = {8, 64 << 10, 8 << 20};
    size_t iters = 0;   // 0: chosen per size
    size_t warmup = 0;  // 0: a tenth of the iterations
    bool wait = false;  // sleep on the wait fd instead of spinning
};

[[noreturn]] void die(const std::string &message) {
    fprintf(stderr, "afmesh-transport-bench: %s\n", message.c_str());
    exit(1);
}

// The command line, on the conventions every afmesh program shares (cli.h).
void declare_options(CLI::App &app, Options &o) {
    app.add_option("--transport", o.transport, "the transport module to measure")->capture_default_str();
    app.add_option("--sizes", o.sizes, "message sizes (1 B to 4 GiB)")
        ->delimiter(',')
        ->type_name("SIZE,...")
        ->default_str(CLI::detail::join(o.sizes, ","))
        ->transform(cli::byte_size())
        ->check(CLI::Range(size_t{1}, size_t{1} << 32).description(""));
    cli::add_count(app, "--iters", o.iters, "timed round trips per size (0: as many as the size warrants)");
    cli::add_count(app, "--warmup", o.warmup, "untimed round trips first (0: a tenth of --iters)");
    app.add_option_function<std::string>(
           "--poll", [&o](const std::string &mode) { o.wait = mode == "wait"; },
           "busy: spin on poll(); wait: sleep on the module's wait fd between polls")
        ->type_name("MODE")
        ->default_str("busy")
        ->check(CLI::IsMember({"busy", "wait"}));
}

// Enough round trips for a stable p99 without spending long on large sizes.
size_t default_iters(size_t bytes) { return std::clamp<size_t>((size_t{512} << 20) / (2 * bytes + 1), 100, 20000); }

struct Summary {
    double p50 = 0, p99 = 0, max = 0, mb_per_s = 0;
};

Summary summarize(std::vector<double> rtt_us, size_t bytes) {
    std::sort(rtt_us.begin(), rtt_us.end());
    Summary s;
    s.p50 = rtt_us[rtt_us.size() / 2];
    s.p99 = rtt_us[std::min(rtt_us.size() - 1, rtt_us.size() * 99 / 100)];
    s.max = rtt_us.back();
    s.mb_per_s = static_cast<double>(bytes) / (s.p50 / 2);  // bytes per microsecond = MB/s
    return s;
}

double micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

// --- through the transport module --------------------------------------------

/** One side: a context of the module with its two registrations. */
struct Side {
    std::unique_ptr<Module> module;
    std::vector<uint8_t> src, dst;
    afmesh_net_mr *src_mr = nullptr, *dst_mr = nullptr;
    afmesh_net_rkey dst_rkey{};
    afmesh_net_conn *conn = nullptr;
    int wait_fd = -1;  // >= 0: sleep on it when a poll finds nothing

    const afmesh_net_ops &ops() const { return module->net(); }
    void *ctx() const { return module->ctx(); }

    void check(int rc, const char *what) const {
        if (rc < 0) die(std::string(what) + " failed (" + std::to_string(rc) + "): " + take_module_error());
    }

    void register_buffers(size_t bytes) {
        afmesh_net_mem mem{sizeof(afmesh_net_mem), AFMESH_MEM_HOST, -1, -1, 0};
        src.assign(bytes, 0x5a);
        dst.assign(bytes, 0);
        afmesh_net_rkey unused{};
        check(ops().mem_register(ctx(), src.data(), bytes, &mem, AFMESH_NET_ACCESS_LOCAL, &src_mr, &unused),
              "mem_register");
        check(ops().mem_register(ctx(), dst.data(), bytes, &mem, AFMESH_NET_ACCESS_REMOTE_WRITE, &dst_mr, &dst_rkey),
              "mem_register");
    }

    /** Enables sleeping on the module's wait fd between polls. */
    void use_wait_fd() {
        if (!(module->net_caps().flags & AFMESH_NET_CAP_WAIT_FD)) die("the module has no wait fd for --poll wait");
        check(ops().get_wait_fd(ctx(), &wait_fd), "get_wait_fd");
    }

    /** One poll(); with a wait fd, sleeps (at most 100 ms) first when it found nothing. */
    int poll(afmesh_net_event *events, int max) {
        const int n = ops().poll(ctx(), events, max);
        check(n, "poll");
        if (n == 0 && wait_fd >= 0 && ops().arm(ctx()) == AFMESH_HAL_OK) {
            pollfd readable{wait_fd, POLLIN, 0};
            ::poll(&readable, 1, 100);
        }
        return n;
    }

    /** Polls until an EV_IMM carrying `imm` arrives. */
    void await_imm(uint32_t imm) {
        afmesh_net_event events[16];
        const auto deadline = Clock::now() + kRoundTripLimit;
        for (;;) {
            const int n = poll(events, 16);
            for (int i = 0; i < n; ++i) {
                if (events[i].type == AFMESH_NET_EV_CONN_ERROR)
                    die(std::string("connection failed: ") + events[i].reason);
                if (events[i].type == AFMESH_NET_EV_IMM) {
                    if (events[i].imm != imm) die("immediate " + std::to_string(events[i].imm) + " out of turn");
                    return;
                }
            }
            if (Clock::now() > deadline) die("a round trip took longer than 30 s");
        }
    }

    /** Writes `bytes` into `peer`'s region; unsignalled but for every 64th, to free send slots. */
    void write(const Side &peer, size_t bytes, uint32_t imm) {
        const uint32_t flags = imm % 64 == 63 ? AFMESH_NET_SIGNAL : 0;
        int rc;
        while ((rc = ops().write_imm(ctx(), conn, src.data(), bytes, src_mr, &peer.dst_rkey, 0, imm, flags, imm)) ==
               AFMESH_HAL_AGAIN) {
            afmesh_net_event events[16];
            poll(events, 16);
        }
        check(rc, "write_imm");
    }
};

class TransportPingPong {
public:
    TransportPingPong(const std::string &name, size_t max_bytes, bool wait) {
        ModuleRecord *record = nullptr;
        std::vector<ModuleRecord> found = discover_modules(Config::process());
        for (ModuleRecord &r : found)
            if (r.kind == AFMESH_MODULE_TRANSPORT && r.name == name && r.state != ModuleState::kShadowed) record = &r;
        if (!record) die("no transport module '" + name + "' on the module search path");
        for (Side *side : {&ping_, &pong_}) {
            Status s = load_module(*record, &side->module);
            if (!s) die(s.to_string());
            side->register_buffers(max_bytes);
        }
        version_ = ping_.module->version();
        connect();
        if (wait) {
            ping_.use_wait_fd();
            pong_.use_wait_fd();
        }
    }

    const std::string &version() const { return version_; }

    std::vector<double> run(size_t bytes, size_t warmup, size_t iters) {
        std::atomic<bool> stop{false};
        std::thread pong([&] {
            afmesh_net_event events[16];
            while (!stop.load(std::memory_order_relaxed)) {
                const int n = pong_.poll(events, 16);
                for (int i = 0; i < n; ++i) {
                    if (events[i].type == AFMESH_NET_EV_CONN_ERROR) die(std::string("pong: ") + events[i].reason);
                    if (events[i].type == AFMESH_NET_EV_IMM) pong_.write(ping_, bytes, events[i].imm);
                }
            }
        });
        std::vector<double> rtt;
        rtt.reserve(iters);
        for (size_t i = 0; i < warmup + iters; ++i) {
            const uint32_t imm = next_imm_++;
            const auto start = Clock::now();
            ping_.write(pong_, bytes, imm);
            ping_.await_imm(imm);
            if (i >= warmup) rtt.push_back(micros(Clock::now() - start));
        }
        stop = true;
        pong.join();
        return rtt;
    }

private:
    void connect() {
        std::vector<uint8_t> address(pong_.module->net_caps().max_addr_size);
        size_t len = address.size();
        pong_.check(pong_.ops().listen(pong_.ctx(), address.data(), &len), "listen");
        ping_.check(ping_.ops().connect(ping_.ctx(), address.data(), len, &ping_.conn), "connect");
        bool connected = false;
        const auto deadline = Clock::now() + kRoundTripLimit;
        while (!connected || !pong_.conn) {
            afmesh_net_event events[16];
            const int n = ping_.poll(events, 16);
            for (int i = 0; i < n; ++i) {
                if (events[i].type == AFMESH_NET_EV_CONN_ERROR) die(std::string("connect: ") + events[i].reason);
                connected |= events[i].type == AFMESH_NET_EV_CONNECTED;
            }
            pong_.poll(events, 16);
            if (!pong_.conn && pong_.ops().accept(pong_.ctx(), &pong_.conn) != AFMESH_HAL_OK) pong_.conn = nullptr;
            if (Clock::now() > deadline) die("connecting took longer than 30 s");
        }
    }

    Side ping_, pong_;
    std::string version_;
    uint32_t next_imm_ = 0;
};

// --- the floor: blocking sockets ---------------------------------------------

void transfer(int fd, uint8_t *buffer, size_t bytes, bool sending) {
    for (size_t done = 0; done < bytes;) {
        const ssize_t n = sending ? ::send(fd, buffer + done, bytes - done, MSG_NOSIGNAL)
                                  : ::recv(fd, buffer + done, bytes - done, 0);
        if (n <= 0) {
            if (n < 0 && errno == EINTR) continue;
            die(std::string("floor socket: ") + (n == 0 ? "closed" : strerror(errno)));
        }
        done += static_cast<size_t>(n);
    }
}

std::vector<double> socket_pingpong(size_t bytes, size_t warmup, size_t iters) {
    const int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof address;
    if (listener < 0 || bind(listener, reinterpret_cast<sockaddr *>(&address), len) != 0 || listen(listener, 1) != 0 ||
        getsockname(listener, reinterpret_cast<sockaddr *>(&address), &len) != 0)
        die(std::string("floor listener: ") + strerror(errno));
    const int ping = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (ping < 0 || ::connect(ping, reinterpret_cast<sockaddr *>(&address), len) != 0)
        die(std::string("floor connect: ") + strerror(errno));
    const int pong = accept(listener, nullptr, nullptr);
    if (pong < 0) die(std::string("floor accept: ") + strerror(errno));
    const int on = 1;
    setsockopt(ping, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    setsockopt(pong, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);

    std::thread echo([&] {
        std::vector<uint8_t> buffer(bytes);
        for (size_t i = 0; i < warmup + iters; ++i) {
            transfer(pong, buffer.data(), bytes, false);
            transfer(pong, buffer.data(), bytes, true);
        }
    });
    std::vector<uint8_t> buffer(bytes, 0x5a);
    std::vector<double> rtt;
    rtt.reserve(iters);
    for (size_t i = 0; i < warmup + iters; ++i) {
        const auto start = Clock::now();
        transfer(ping, buffer.data(), bytes, true);
        transfer(ping, buffer.data(), bytes, false);
        if (i >= warmup) rtt.push_back(micros(Clock::now() - start));
    }
    echo.join();
    close(ping);
    close(pong);
    close(listener);
    return rtt;
}

std::string size_text(size_t bytes) {
    if (bytes >= (1 << 20) && bytes % (1 << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
    if (bytes >= (1 << 10) && bytes % (1 << 10) == 0) return std::to_string(bytes >> 10) + " KiB";
    return std::to_string(bytes) + " B";
}

}  // namespace
}  // namespace afmesh::bench

namespace afmesh::bench {
namespace {

/** The floor's ping-pong of one size, and what it is. */
struct Floor {
    std::string what;
    std::vector<double> (*run)(const Options &, size_t bytes, size_t warmup, size_t iters);
};

Floor choose_floor(const Options &options) {
    if (options.transport != "fabric") return {"a blocking-socket ping-pong of the same sizes on TCP loopback",
                                               [](const Options &, size_t bytes, size_t warmup, size_t iters) {
                                                   return socket_pingpong(bytes, warmup, iters);
                                               }};
#ifdef AFMESH_BENCH_FABRIC_FLOOR
    const char *provider = getenv("AFMESH_FABRIC_PROVIDER");
    if (!provider || !*provider) die("the raw libfabric floor needs AFMESH_FABRIC_PROVIDER (e.g. shm, 'tcp;ofi_rxm')");
    return {std::string("the same ping-pong written directly against libfabric's ") + provider + " provider",
            [](const Options &o, size_t bytes, size_t warmup, size_t iters) {
                try {
                    return fabric_pingpong(getenv("AFMESH_FABRIC_PROVIDER"), bytes, warmup, iters, o.wait);
                } catch (const std::exception &e) {
                    die(e.what());
                }
            }};
#else
    die("this build has no raw libfabric floor (libfabric was not found)");
#endif
}

}  // namespace
}  // namespace afmesh::bench

int main(int argc, char **argv) {
    using namespace afmesh::bench;
    Options options;
    CLI::App app{"Round trips of write_imm through a transport module, next to the raw floor of the same transport.",
                 "afmesh-transport-bench"};
    declare_options(app, options);
    if (std::optional<int> status = afmesh::cli::parse(app, argc, argv)) return *status;
    const Floor floor = choose_floor(options);
    TransportPingPong transport(options.transport, *std::max_element(options.sizes.begin(), options.sizes.end()),
                                options.wait);
    printf(
        "afmesh-transport-bench: write_imm round trips through '%s' (%s), polling %s,\n"
        "against %s (the floor).\n"
        "RTT in us; MB/s = size / (p50 RTT / 2).\n\n",
        options.transport.c_str(), transport.version().c_str(), options.wait ? "with sleeps on the wait fd" : "busily",
        floor.what.c_str());
    printf("%9s %6s | %9s %9s %9s %9s | %9s %9s %9s %9s | %6s\n", "size", "iters", "p50", "p99", "max", "MB/s",
           "floor p50", "p99", "max", "MB/s", "ratio");
    for (size_t bytes : options.sizes) {
        const size_t iters = options.iters ? options.iters : default_iters(bytes);
        const size_t warmup = options.warmup ? options.warmup : std::max<size_t>(1, iters / 10);
        const Summary t = summarize(transport.run(bytes, warmup, iters), bytes);
        const Summary f = summarize(floor.run(options, bytes, warmup, iters), bytes);
        printf("%9s %6zu | %9.1f %9.1f %9.1f %9.1f | %9.1f %9.1f %9.1f %9.1f | %6.2f\n", size_text(bytes).c_str(),
               iters, t.p50, t.p99, t.max, t.mb_per_s, f.p50, f.p99, f.max, f.mb_per_s, t.p50 / f.p50);
        fflush(stdout);
    }
    return 0;
}
