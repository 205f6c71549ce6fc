// core/output_file.h: whole-file outputs are renamed into place only when complete, devices are
// written in place and never replaced, and the commands that write files go through it.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "core/error.h"
#include "core/output_file.h"
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
