// read_regular_file: only a regular file of bounded size is read; everything
// else is a prompt, one-line error naming the path and what it is.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>

#include "gateway/file_read.hpp"
#include "scratch_files.hpp"

namespace cg {
namespace {

constexpr std::size_t kLimit = 4096;

class FileRead : public testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& text) { return dir_.write(name, text); }
  // Reads `path`; on failure returns false with the error in err_.
  bool read(const std::string& path, std::string& out, std::size_t limit = kLimit) {
    err_.clear();
    return read_regular_file(path, "test file", limit, out, &err_);
  }

  test::ScratchDir dir_;
  std::string err_;
};

TEST_F(FileRead, RegularFileIsReadWholeAndByteExact) {
  const std::string text("line one\nbinary \0\xff bytes\n", 25);
  std::string out = "old contents";
  ASSERT_TRUE(read(write("a", text), out)) << err_;
  EXPECT_EQ(out, text);
}

TEST_F(FileRead, EmptyFileIsFine) {
  std::string out = "old contents";
  ASSERT_TRUE(read(write("empty", ""), out)) << err_;
  EXPECT_EQ(out, "");
}

TEST_F(FileRead, FileOfExactlyTheLimitIsRead) {
  std::string out;
  ASSERT_TRUE(read(write("full", std::string(kLimit, 'x')), out)) << err_;
  EXPECT_EQ(out.size(), kLimit);
}

TEST_F(FileRead, FileLargerThanTheLimitIsRefusedWithTheLimitInTheError) {
  const std::string path = write("big", std::string(kLimit + 1, 'x'));
  std::string out = "untouched";
  EXPECT_FALSE(read(path, out));
  EXPECT_EQ(err_, path + ": larger than 4096 bytes (4 KiB, the limit for a test file)");
  EXPECT_EQ(out, "untouched");
}

TEST_F(FileRead, HugeSparseFileIsRefusedBeforeAnyRead) {
  // 64 GiB announced: refused from fstat alone, with no allocation.
  const std::string path = dir_.sparse("huge", off_t{64} << 30);
  std::string out;
  EXPECT_FALSE(read(path, out, std::size_t{1} << 30));
  EXPECT_EQ(err_, path + ": larger than 1073741824 bytes (1 GiB, the limit for a test file)");
}

TEST_F(FileRead, MissingFileSaysSo) {
  std::string out = "untouched";
  EXPECT_FALSE(read(dir_.path("nope"), out));
  EXPECT_EQ(err_, dir_.path("nope") + ": cannot open: No such file or directory");
  EXPECT_EQ(out, "untouched");
}

TEST_F(FileRead, DirectoryIsRefused) {
  std::string out = "untouched";
  EXPECT_FALSE(read(dir_.path(), out));
  EXPECT_EQ(err_, dir_.path() + ": is a directory");
  EXPECT_EQ(out, "untouched");
}

TEST_F(FileRead, DevZeroIsRefusedNotReadForever) {
  std::string out;
  EXPECT_FALSE(read("/dev/zero", out));
  EXPECT_EQ(err_, "/dev/zero: not a regular file (a character device)");
}

TEST_F(FileRead, FifoWithoutWriterIsRefusedPromptly) {
  const std::string path = dir_.fifo("fifo");
  const auto r = test::returns_within(std::chrono::seconds(5), {path}, [&] {
    std::string out, err;
    return read_regular_file(path, "test file", kLimit, out, &err) ? std::string("read") : err;
  });
  ASSERT_TRUE(r.has_value()) << "reading a FIFO blocked for 5 s";
  EXPECT_EQ(*r, path + ": not a regular file (a FIFO)");
}

TEST_F(FileRead, SocketIsRefused) {
  const std::string path = dir_.path("sock");
  const int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(s, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  ASSERT_LT(path.size(), sizeof(a.sun_path));
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  std::string out;
  EXPECT_FALSE(read(path, out));
  EXPECT_EQ(err_, path + ": not a regular file (a socket)");
  ::close(s);
}

TEST_F(FileRead, SymlinkToARegularFileIsFollowed) {
  const std::string target = write("target", "host example.org\n");
  const std::string link = dir_.path("link");
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  std::string out;
  ASSERT_TRUE(read(link, out)) << err_;
  EXPECT_EQ(out, "host example.org\n");
}

TEST_F(FileRead, FileWhoseSizeIsUnknownIsReadToItsEnd) {
  // /proc files are regular but report size 0: the read goes on to EOF.
  std::string out;
  ASSERT_TRUE(read("/proc/self/status", out, std::size_t{1} << 20)) << err_;
  EXPECT_NE(out.find("Pid:"), std::string::npos);
}

TEST_F(FileRead, UnreadableFileSaysWhy) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads any file";
  const std::string path = write("secret", "x");
  ASSERT_EQ(::chmod(path.c_str(), 0), 0);
  std::string out;
  EXPECT_FALSE(read(path, out));
  EXPECT_EQ(err_, path + ": cannot open: Permission denied");
}

}  // namespace
}  // namespace cg
