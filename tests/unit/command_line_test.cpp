// SPDX-License-Identifier: Apache-2.0
// The command line every afmesh program shares (tools/cli): how numbers and
// sizes are read, and, run as child processes, `afmesh` and
// afmesh-transport-bench answering --help everywhere and refusing a bad
// command line with exit 2, one line saying why, and the usage.
#include <gtest/gtest.h>

#include "child_process.h"
#include "cli.h"

#ifndef AFMESH_BIN
#error "the build must define AFMESH_BIN (the afmesh executable)"
#endif
#ifndef AFMESH_TRANSPORT_BENCH_BIN
#error "the build must define AFMESH_TRANSPORT_BENCH_BIN"
#endif
#ifndef AFMESH_VERSION_STRING
#error "the build must define AFMESH_VERSION_STRING"
#endif

namespace afmesh {
namespace {

using test::ChildResult;

bool contains(const std::string &text, std::string_view part) { return text.find(part) != std::string::npos; }

std::string first_line(const std::string &text) { return text.substr(0, text.find('\n')); }

ChildResult afmesh(std::vector<std::string> args) {
    ChildResult r = test::run_tool(AFMESH_BIN, std::move(args), {});
    EXPECT_EQ(r.spawn_error, "");
    EXPECT_EQ(r.signal, 0) << "afmesh was killed; stderr:\n" << r.err;
    return r;
}

// ---- reading sizes and numbers ----

TEST(byte_size, ReadsDigitsWithBinarySuffixesInAnyCase) {
    const std::pair<const char *, uint64_t> cases[] = {
        {"8", 8},           {"0", 0},         {"4K", 4096},          {"4k", 4096},
        {"64KiB", 65536},   {"64kib", 65536}, {"1M", 1 << 20},       {"1MiB", 1 << 20},
        {"2G", 2ull << 30}, {"2GiB", 2ull << 30}, {"007", 7}, {"18446744073709551615", UINT64_MAX},
    };
    for (auto [text, bytes] : cases) EXPECT_EQ(cli::parse_byte_size(text), bytes) << text;
}

TEST(byte_size, RefusesWhatIsNotASize) {
    for (const char *text : {"", "abc", "3x", "-1", "+1", "0x10", "1.5K", "K", "1KB", "1 K", "1Ki", "4T",
                             "18446744073709551616", "17179869184G"})
        EXPECT_EQ(cli::parse_byte_size(text), std::nullopt) << text;
}

// Parses `--n <text>` into an int checked by `check`; returns the value, or nullopt when CLI11 refused it.
std::optional<double> parse_one(const std::string &text, const CLI::Validator &check, bool real = false) {
    CLI::App app;
    int whole = 0;
    double number = 0;
    if (real)
        app.add_option("--n", number)->check(check);
    else
        app.add_option("--n", whole)->transform(check);
    try {
        app.parse(std::vector<std::string>{text, "--n"});  // CLI11 takes the arguments in reverse
    } catch (const CLI::ParseError &) {
        return std::nullopt;
    }
    return real ? number : whole;
}

TEST(whole_number, AcceptsDecimalDigitsOnlyAndReadsLeadingZerosAsDecimal) {
    EXPECT_EQ(parse_one("12", cli::whole_number()), 12);
    EXPECT_EQ(parse_one("010", cli::whole_number()), 10);  // not octal 8
    EXPECT_EQ(parse_one("0", cli::whole_number()), 0);
    for (const char *text : {"3x", "1e3", "0x10", "-3", "+3", " 3", "3.0", ""})
        EXPECT_EQ(parse_one(text, cli::whole_number()), std::nullopt) << text;
}

TEST(non_negative_real, AcceptsFiniteNumbersOfZeroOrMore) {
    EXPECT_EQ(parse_one("0.4", cli::non_negative_real(), true), 0.4);
    EXPECT_EQ(parse_one("0", cli::non_negative_real(), true), 0.0);
    for (const char *text : {"nan", "inf", "-1", "1.5s", "abc"})
        EXPECT_EQ(parse_one(text, cli::non_negative_real(), true), std::nullopt) << text;
}

// ---- afmesh ----

const std::vector<std::string> kCommands = {"info", "run", "bench", "scheduler", "help"};

TEST(afmesh_cli, VersionPrintsTheProjectVersion) {
    for (const char *flag : {"--version", "-V"}) {
        ChildResult r = afmesh({flag});
        EXPECT_EQ(r.exit_code, 0);
        EXPECT_EQ(r.out.rfind(std::string("afmesh ") + AFMESH_VERSION_STRING, 0), 0u) << r.out;
    }
}

TEST(afmesh_cli, HelpListsEveryCommand) {
    for (const char *flag : {"help", "--help", "-h"}) {
        SCOPED_TRACE(flag);
        ChildResult r = afmesh({flag});
        EXPECT_EQ(r.exit_code, 0) << r.err;
        EXPECT_TRUE(contains(r.out, "Usage: afmesh [OPTIONS] [COMMAND]")) << r.out;
        for (const std::string &command : kCommands) EXPECT_TRUE(contains(r.out, "\n  " + command + " ")) << r.out;
        EXPECT_EQ(r.err, "");
    }
}

TEST(afmesh_cli, EveryCommandAnswersHelpTheSameThreeWays) {
    for (const std::string &command : kCommands) {
        SCOPED_TRACE(command);
        ChildResult long_flag = afmesh({command, "--help"});
        EXPECT_EQ(long_flag.exit_code, 0) << long_flag.err;
        EXPECT_TRUE(contains(long_flag.out, "Usage: afmesh " + command + " ")) << long_flag.out;
        EXPECT_TRUE(contains(long_flag.out, "-h,--help")) << long_flag.out;
        EXPECT_EQ(afmesh({command, "-h"}).out, long_flag.out);
        EXPECT_EQ(afmesh({"help", command}).out, long_flag.out);
    }
}

TEST(afmesh_cli, HelpShowsEachOptionWithItsDefault) {
    ChildResult r = afmesh({"bench", "--help"});
    for (const char *option : {"--iters N=200", "--sizes SIZE,...=8,65536", "--dtype DTYPE:{bf16,fp16,fp32,fp8,int8}=bf16",
                               "--batch MODE:{all,any}=all", "--json FILE", "--trace"})
        EXPECT_TRUE(contains(r.out, option)) << option << "\n" << r.out;
}

struct BadLine {
    std::vector<std::string> args;
    std::string command;  // who answers: "afmesh" or "afmesh <subcommand>"
    std::string reason;   // a part of the one-line reason
};

TEST(afmesh_cli, ABadCommandLineExitsTwoWithTheReasonAndTheUsage) {
    const BadLine cases[] = {
        {{}, "afmesh", "a command is required"},
        {{"frobnicate"}, "afmesh", "unknown command 'frobnicate'"},
        {{"--frobnicate"}, "afmesh", "not expected: --frobnicate"},
        {{"help", "frobnicate"}, "afmesh help", "frobnicate not in {info,run,bench,scheduler,help}"},
        {{"info", "--yaml"}, "afmesh info", "not expected: --yaml"},
        {{"bench", "--sizes", "abc"}, "afmesh bench", "--sizes: not a byte size: 'abc' (e.g. 8, 4K, 64KiB, 1M)"},
        {{"bench", "--sizes", "8,64X"}, "afmesh bench", "not a byte size: '64X'"},
        {{"bench", "--sizes", "4"}, "afmesh bench", "--sizes: Value 4 not in range 8"},
        {{"bench", "--iters", "3x"}, "afmesh bench", "--iters: not a whole number: '3x'"},
        {{"bench", "--iters", "0"}, "afmesh bench", "--iters: Value 0 not in range 1"},
        {{"bench", "--iters"}, "afmesh bench", "--iters"},
        {{"bench", "--tokens", "99999999999"}, "afmesh bench", "--tokens"},
        {{"bench", "--seconds", "nan"}, "afmesh bench", "--seconds: not a number of zero or more: 'nan'"},
        {{"bench", "--dtype", "bf17"}, "afmesh bench", "--dtype: bf17 not in {bf16,fp16,fp32,fp8,int8}"},
        {{"bench", "--poll", "busy,spin"}, "afmesh bench", "--poll: spin not in {busy,adaptive,blocking}"},
        {{"bench", "--batch", "some"}, "afmesh bench", "--batch: some not in {all,any}"},
        {{"bench", "--polls", "busy"}, "afmesh bench", "--polls"},
        {{"run"}, "afmesh run", "program is required"},
        {{"run", "--workers", "0", "--", "true"}, "afmesh run", "--workers: Value 0 not in range 1"},
        {{"run", "--only", "some", "--", "true"}, "afmesh run", "--only: some not in {all,servers,workers}"},
        {{"run", "--timeout", "5s", "--", "true"}, "afmesh run", "--timeout: not a whole number: '5s'"},
        {{"scheduler", "--listen"}, "afmesh scheduler", "--listen"},
        {{"scheduler", "127.0.0.1:0"}, "afmesh scheduler", "127.0.0.1:0"},
    };
    for (const BadLine &bad : cases) {
        std::string line;
        for (const std::string &arg : bad.args) line += " " + arg;
        SCOPED_TRACE("afmesh" + line);
        ChildResult r = afmesh(bad.args);
        EXPECT_EQ(r.exit_code, 2);
        EXPECT_EQ(r.out, "");
        EXPECT_EQ(first_line(r.err).rfind(bad.command + ": ", 0), 0u) << r.err;
        EXPECT_TRUE(contains(first_line(r.err), bad.reason)) << r.err;
        EXPECT_TRUE(contains(r.err, "\nUsage: " + bad.command + " [OPTIONS]")) << r.err;
        EXPECT_TRUE(contains(r.err, "Run '" + bad.command + " --help' for its options.")) << r.err;
    }
}

// ---- afmesh-transport-bench ----

ChildResult transport_bench(std::vector<std::string> args) {
    ChildResult r = test::run_tool(AFMESH_TRANSPORT_BENCH_BIN, std::move(args), {});
    EXPECT_EQ(r.spawn_error, "");
    EXPECT_EQ(r.signal, 0) << r.err;
    return r;
}

TEST(transport_bench_cli, AnswersHelp) {
    ChildResult r = transport_bench({"--help"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "Usage: afmesh-transport-bench [OPTIONS]")) << r.out;
    EXPECT_TRUE(contains(r.out, "--sizes SIZE,...")) << r.out;
}

TEST(transport_bench_cli, ABadCommandLineExitsTwoWithTheReason) {
    const std::pair<std::vector<std::string>, std::string> cases[] = {
        {{"--sizes", "64K,1x"}, "--sizes: not a byte size: '1x'"},
        {{"--iters", "3x"}, "--iters: not a whole number: '3x'"},
        {{"--poll", "spin"}, "--poll: spin not in {busy,wait}"},
        {{"--frobnicate"}, "not expected: --frobnicate"},
    };
    for (const auto &[args, reason] : cases) {
        ChildResult r = transport_bench(args);
        EXPECT_EQ(r.exit_code, 2) << reason;
        EXPECT_EQ(first_line(r.err).rfind("afmesh-transport-bench: ", 0), 0u) << r.err;
        EXPECT_TRUE(contains(first_line(r.err), reason)) << r.err;
        EXPECT_TRUE(contains(r.err, "\nUsage: afmesh-transport-bench [OPTIONS]")) << r.err;
    }
}

// The size syntax `afmesh bench` takes, here measured for real (one round trip).
TEST(transport_bench_cli, ReadsSizesAsAfmeshBenchDoes) {
    ChildResult r = transport_bench({"--transport", "tcp", "--sizes", "4K,64KiB", "--iters", "1", "--warmup", "1"});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_TRUE(contains(r.out, "\n    4 KiB ")) << r.out;
    EXPECT_TRUE(contains(r.out, "\n   64 KiB ")) << r.out;
}

}  // namespace
}  // namespace afmesh
