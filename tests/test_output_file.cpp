// core/output_file.h: whole-file outputs are renamed into place only when complete, devices are
// written in place and never replaced, and the commands that write files go through it.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/output_file.h"
#include "support/cli_process.h"
#include "support/run_cli.h"
#include "support/test_data.h"

using namespace llmctl;
namespace fs = std::filesystem;

namespace {

bool has(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

bool is_char_device(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISCHR(st.st_mode);
}

// Files in dir other than the ones named.
int others(const std::string& dir, const std::string& name) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += e.path().filename() != name;
  return n;
}

}  // namespace

TEST_CASE("write_output_file: complete files only, no temporary left", "[cli]") {
  const std::string dir = test::temp_dir() + "/out_file";
  fs::create_directories(dir);
  const std::string path = dir + "/a.txt";
  write_output_file(path, "first");
  CHECK(test::read_file(path) == "first");
  write_output_file(path, "second, longer");
  CHECK(test::read_file(path) == "second, longer");
  CHECK(others(dir, "a.txt") == 0);
  // a directory that does not exist: the OS's reason, nothing created
  CHECK_THROWS_WITH(write_output_file(dir + "/missing/b.txt", "x"),
                    Catch::Contains("No such file or directory"));
  // a directory as the target is refused and stays
  CHECK_THROWS_WITH(write_output_file(dir, "x"), Catch::Contains("is a directory"));
  CHECK(fs::is_directory(dir));
}

TEST_CASE("write_output_file: devices are written in place, their errors reported", "[cli]") {
  REQUIRE(is_char_device("/dev/null"));
  write_output_file("/dev/null", "discarded");
  CHECK(is_char_device("/dev/null"));
  if (!is_char_device("/dev/full")) {
    WARN("skipped: no /dev/full");
    return;
  }
  CHECK_THROWS_WITH(write_output_file("/dev/full", "x"), Catch::Contains("No space left on device"));
  CHECK(is_char_device("/dev/full"));
}

TEST_CASE("quantize and kvplan --svg never replace a device, a full device is an error", "[cli]") {
  if (!is_char_device("/dev/full")) {
    WARN("skipped: no /dev/full");
    return;
  }
  const std::string model = test::require_test_file("models/stories260K.gguf");
  auto r = test::run_llmctl({"quantize", model, "/dev/full", "--type", "q8_0", "--force"});
  CHECK(r.code == 1);
  CHECK(has(r.err, "is a character device"));
  CHECK(is_char_device("/dev/full"));
  r = test::run_llmctl({"kvplan", "--model", "qwen3-8b", "--gpu", "l40s", "--svg", "/dev/full",
                        "--no-sweep"});
  CHECK(r.code == 1);
  CHECK(has(r.err, "No space left on device"));
  CHECK(is_char_device("/dev/full"));
}

// --logits-out streams through OutputFile (issue 20 point 3): it was an ofstream truncating the
// target at the start, so a failed run left a zero-byte file, with "write failed" as the reason.
TEST_CASE("run --logits-out: complete or not at all, with the OS's reason", "[cli]") {
  const std::string model = test::require_test_file("models/stories260K.gguf");
  const std::string dir = test::temp_dir() + "/logits_out";
  fs::create_directories(dir);
  const std::string path = dir + "/l.f32";
  const std::vector<std::string> run{"run", "-m", model, "-p", "Once upon a time", "-n", "1",
                                     "--temp", "0", "-t", "1"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = run;
    a.insert(a.end(), extra.begin(), extra.end());
    return test::run_llmctl(a);
  };
  // a run that fails after the file is opened (the prompt does not fit -c 3): the old file stays
  test::write_file(path, "old bytes");
  auto r = with({"-c", "3", "--logits-out", path});
  INFO("stderr: " << r.err);
  CHECK(r.code == 1);
  CHECK(test::read_file(path) == "old bytes");
  CHECK_FALSE(test::temp_file_beside(path));
  // a run that succeeds replaces it with the complete file, mode as any new file
  r = with({"--logits-out", path});
  REQUIRE(r.code == 0);
  const std::string bytes = test::read_file(path);
  CHECK(bytes.size() % (512 * 4) == 0);
  CHECK(bytes.size() > 0);
  CHECK(others(dir, "l.f32") == 0);
  // a directory is refused and stays; a full device is written in place and its error named
  r = with({"--logits-out", dir});
  CHECK(r.code == 1);
  CHECK(has(r.err, "is a directory"));
  CHECK(fs::is_directory(dir));
  if (is_char_device("/dev/full")) {
    r = with({"--logits-out", "/dev/full"});
    CHECK(r.code == 1);
    CHECK(has(r.err, "No space left on device"));
    CHECK(is_char_device("/dev/full"));
  }
  // /dev/stderr names the caller's descriptor (here a regular file): written in place, the link
  // stays (renaming over it would replace /dev/stderr itself when run as root)
  r = with({"--logits-out", "/dev/stderr"});
  CHECK(r.code == 0);
  CHECK(fs::is_symlink("/dev/stderr"));
}

TEST_CASE("run --logits-out to a FIFO: written in place, the same bytes as to a file", "[cli]") {
  const std::string model = test::require_test_file("models/stories260K.gguf");
  const std::string dir = test::temp_dir() + "/logits_fifo";
  fs::create_directories(dir);
  const std::string file = dir + "/l.f32", fifo = dir + "/l.fifo", got = dir + "/got.f32";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const std::string args = " run -m '" + model + "' -p 'Once upon a time' -n 1 --temp 0 -t 1 --logits-out ";
  const std::string bin = "'" + test::llmctl_binary_beside_tests() + "'";
  REQUIRE(std::system((bin + args + "'" + file + "' 2>/dev/null").c_str()) == 0);
  // the reader has a deadline, so a writer that never opens the FIFO fails instead of hanging
  const std::string cmd = "timeout 60 cat '" + fifo + "' > '" + got + "' & " + bin + args + "'" +
                          fifo + "' 2>/dev/null; rc=$?; wait; exit $rc";
  CHECK(std::system(cmd.c_str()) == 0);
  CHECK(test::read_file(got) == test::read_file(file));
  struct stat st {};
  CHECK((::stat(fifo.c_str(), &st) == 0 && S_ISFIFO(st.st_mode)));
}
