// SPDX-License-Identifier: Apache-2.0
// The exclude-file reader behind CONFORMANCE_EXCLUDE: its format, its
// matching, its errors, and the exclude files of this tree.
#include "exclude_list.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace afmesh::test {
namespace {

ExcludeList parsed(const std::string &text, const std::string &file = "x.exclude") {
    ExcludeList list;
    std::istringstream in(text);
    const Status s = list.parse(in, file);
    EXPECT_TRUE(s) << s.to_string();
    return list;
}

TEST(ExcludeListTest, SkipsCommentsAndBlankLinesAndKeepsReasonsWhole) {
    const ExcludeList list = parsed(
        "# SPDX-License-Identifier: Apache-2.0\n"
        "\n"
        "   \t\n"
        "  # an indented comment\n"
        "*Writes4KiB*   drops it at the target, never completes it   \n"
        "Suite.Exact\tone word\r\n"
        "*Last*  no newline after it");
    ASSERT_EQ(list.entries().size(), 3u);
    EXPECT_EQ(list.entries()[0].pattern, "*Writes4KiB*");
    EXPECT_EQ(list.entries()[0].reason, "drops it at the target, never completes it");
    EXPECT_EQ(list.entries()[0].line, 5);
    EXPECT_EQ(list.entries()[1].pattern, "Suite.Exact");
    EXPECT_EQ(list.entries()[1].reason, "one word");
    EXPECT_EQ(list.entries()[1].line, 6);
    EXPECT_EQ(list.entries()[2].reason, "no newline after it");
    EXPECT_EQ(list.entries()[2].line, 7);
}

TEST(ExcludeListTest, KeepsAHashInsideAReason) {
    const ExcludeList list = parsed("*A*  see issue #27\n");
    ASSERT_EQ(list.entries().size(), 1u);
    EXPECT_EQ(list.entries()[0].reason, "see issue #27");
}

TEST(ExcludeListTest, RejectsAnEntryWithoutAReasonNamingFileAndLine) {
    for (const char *bare : {"*NoReason*", "*NoReason*   \t", "*NoReason*\r"}) {
        ExcludeList list;
        std::istringstream in(std::string("# header\n*Fine*  a reason\n\n") + bare + "\n*Later*  another\n");
        const Status s = list.parse(in, "dir/fabric-shm.exclude");
        ASSERT_FALSE(s) << "accepted '" << bare << "'";
        EXPECT_NE(s.message().find("dir/fabric-shm.exclude:4:"), std::string::npos) << s.message();
        EXPECT_NE(s.message().find("*NoReason*"), std::string::npos) << s.message();
        EXPECT_TRUE(list.entries().empty()) << "a rejected file still added entries";
    }
}

TEST(ExcludeListTest, MatchesLikeAGtestFilter) {
    EXPECT_TRUE(matches_pattern("*WriteToADeregisteredRegionIsRefused*",
                                "Modules/TransportConformance.WriteToADeregisteredRegionIsRefused/fabric"));
    EXPECT_FALSE(matches_pattern("*WriteToADeregisteredRegionIsRefused*",
                                 "Modules/TransportConformance.WriteToARegion/fabric"));
    EXPECT_TRUE(matches_pattern("Suite.Test", "Suite.Test"));
    EXPECT_FALSE(matches_pattern("Suite.Test", "Suite.Test2")) << "a pattern without * is anchored at the end";
    EXPECT_FALSE(matches_pattern("Suite.Test", "ASuite.Test")) << "a pattern without * is anchored at the start";
    EXPECT_TRUE(matches_pattern("*/fabric", "Modules/TransportConformance.Writes4KiB/fabric"));
    EXPECT_FALSE(matches_pattern("*/fabric", "Modules/TransportConformance.Writes4KiB/tcp"));
    EXPECT_TRUE(matches_pattern("M*s/*.W*B/fabric", "Modules/TransportConformance.Writes4KiB/fabric"));
    EXPECT_TRUE(matches_pattern("*.Writes?KiB/*", "Modules/T.Writes4KiB/tcp"));
    EXPECT_FALSE(matches_pattern("*.Writes?KiB/*", "Modules/T.Writes64KiB/tcp")) << "? is exactly one character";
    EXPECT_TRUE(matches_pattern("**", ""));
    EXPECT_FALSE(matches_pattern("?", ""));
    EXPECT_TRUE(matches_pattern("*aab", "aaaab")) << "a * must give back characters it took";
    EXPECT_FALSE(matches_pattern("*.", "a.b")) << "the text after the last * ends the name";
}

TEST(ExcludeListTest, TheFirstMatchingEntryWins) {
    const ExcludeList list = parsed(
        "*Connect*  connect reason\n"
        "*ConnectToAClosedEndpointFails*  specific reason\n");
    const ExcludeEntry *entry = list.match("Modules/TransportConformance.ConnectToAClosedEndpointFails/fabric");
    ASSERT_NE(entry, nullptr);
    EXPECT_EQ(entry->reason, "connect reason");
    EXPECT_EQ(list.match("Modules/TransportConformance.Writes4KiB/fabric"), nullptr);
}

TEST(ExcludeListTest, ReportsEntriesMatchingNoTest) {
    const ExcludeList list = parsed(
        "*Writes4KiB*  reason a\n"
        "*Renamed*  reason b\n"
        "*/fabric  reason c\n");
    const std::vector<std::string> tests{"M/T.Writes4KiB/tcp", "M/T.WritesOneByte/tcp"};
    const std::vector<const ExcludeEntry *> stale = list.unmatched(tests);
    ASSERT_EQ(stale.size(), 2u);
    EXPECT_EQ(stale[0]->pattern, "*Renamed*");
    EXPECT_EQ(stale[1]->pattern, "*/fabric");
    EXPECT_TRUE(list.unmatched({"M/T.Writes4KiB/fabric", "M/T.Renamed/fabric"}).empty());
}

TEST(ExcludeListTest, SkipMessageNamesProviderReasonAndPlace) {
    const ExcludeList list = parsed("\n*A*  the gap\n", "/src/excludes/fabric-shm.tsan.exclude");
    EXPECT_EQ(list.entries()[0].skip_message(),
              "excluded on fabric-shm: the gap (/src/excludes/fabric-shm.tsan.exclude:2)");
    EXPECT_EQ(parsed("*A*  r\n", "fabric-tcp.exclude").entries()[0].skip_message(),
              "excluded on fabric-tcp: r (fabric-tcp.exclude:1)");
}

// Tests of reading files, in a directory of their own that goes with them:
// ctest runs these tests, and other build trees' copies of them, side by side.
class ExcludeFilesTest : public ::testing::Test {
protected:
    void SetUp() override { std::filesystem::create_directories(dir_); }
    void TearDown() override { std::filesystem::remove_all(dir_); }

    std::string path(const std::string &name) const { return dir_ + "/" + name; }
    // A file at path(name) holding `text`.
    std::string file(const std::string &name, const std::string &text) const {
        std::ofstream(path(name)) << text;
        return path(name);
    }

    const std::string dir_ = ::testing::TempDir() + "exclude_list_test." + std::to_string(getpid());
};

TEST_F(ExcludeFilesTest, LoadsEachFileOfAList) {
    const std::string first = file("first.exclude", "# c\n*A*  from the first\n");
    const std::string second = file("second.exclude", "*B*  from the second\n");
    ExcludeList list;
    const Status s = list.load(first + ":" + second + ":");
    ASSERT_TRUE(s) << s.to_string();
    ASSERT_EQ(list.entries().size(), 2u);
    EXPECT_EQ(list.entries()[0].where(), first + ":2");
    EXPECT_EQ(list.entries()[1].where(), second + ":1");
    EXPECT_EQ(list.match("S.B")->reason, "from the second");
}

TEST_F(ExcludeFilesTest, AFileThatCannotBeReadIsAnError) {
    const std::string good = file("good.exclude", "*A*  a\n");
    const std::string missing = path("no-such-file.exclude");
    ExcludeList list;
    Status s = list.load(good + ":" + missing);
    ASSERT_FALSE(s);
    EXPECT_NE(s.message().find(missing), std::string::npos) << s.message();

    const std::string directory = path("a-directory.exclude");
    std::filesystem::create_directories(directory);
    s = list.load(directory);
    ASSERT_FALSE(s) << "a directory was read as an empty exclude file";
    EXPECT_NE(s.message().find(directory), std::string::npos) << s.message();
}

TEST_F(ExcludeFilesTest, AMalformedFileInAListIsAnErrorNamingItsLine) {
    const std::string good = file("good.exclude", "*A*  a\n");
    const std::string bad = file("bad.exclude", "# c\n\n*B*\n");
    ExcludeList list;
    const Status s = list.load(good + ":" + bad);
    ASSERT_FALSE(s);
    EXPECT_NE(s.message().find(bad + ":3:"), std::string::npos) << s.message();
}

// The files the fabric runs read parse, name their licence first, and give
// each entry a reason.
TEST(ExcludeListTest, TheTreesExcludeFilesParse) {
    int files = 0;
    for (const auto &file : std::filesystem::directory_iterator(AFMESH_EXCLUDES_DIR)) {
        if (file.path().extension() != ".exclude") continue;
        ++files;
        std::ifstream in(file.path());
        std::string first;
        std::getline(in, first);
        EXPECT_EQ(first, "# SPDX-License-Identifier: Apache-2.0") << file.path();
        ExcludeList list;
        const Status s = list.load(file.path().string());
        EXPECT_TRUE(s) << s.to_string();
    }
    EXPECT_GE(files, 3) << "fabric-shm, fabric-shm.tsan and fabric-tcp: were the files moved from " AFMESH_EXCLUDES_DIR "?";
}

}  // namespace
}  // namespace afmesh::test
