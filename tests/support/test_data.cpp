#include "support/test_data.h"

#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace fs = std::filesystem;

namespace llmctl::test {

std::string test_data_dir() {
  if (const char* env = std::getenv("LLMCTL_TEST_DATA"); env != nullptr && *env != '\0')
    return fs::is_directory(env) ? std::string(env) : std::string();
  // ../shared beside the checkout (development and CI), else the checkout itself once
  // scripts/fetch-models.sh has filled its models/ and vocab/.
  const fs::path shared = fs::path(LLMCTL_SOURCE_DIR) / ".." / "shared";
  if (fs::is_directory(shared)) return fs::weakly_canonical(shared).string();
  const fs::path checkout = fs::path(LLMCTL_SOURCE_DIR);
  if (fs::is_directory(checkout / "vocab") || fs::exists(checkout / "models" / "stories260K.gguf"))
    return checkout.string();
  return std::string();
}

std::string require_test_file(const std::string& rel) {
  const std::string dir = test_data_dir();
  const std::string path = dir.empty() ? std::string() : (fs::path(dir) / rel).string();
  if (!path.empty() && fs::exists(path)) return path;
  const char* required = std::getenv("LLMCTL_REQUIRE_TEST_DATA");
  const std::string what =
      dir.empty() ? "test data directory not found (set LLMCTL_TEST_DATA)"
                  : "test data file missing: " + (fs::path(dir) / rel).string();
  if (required != nullptr && std::string(required) == "1") FAIL(what);
  std::fprintf(stderr, "SKIPPED: %s\n", what.c_str());
  std::fflush(nullptr);
  std::_Exit(77);
}

std::string require_fetched_model(const std::string& name) {
  std::vector<fs::path> places;
  if (const char* cache = std::getenv("LLMCTL_MODEL_CACHE"); cache != nullptr && *cache != '\0')
    places.push_back(fs::path(cache) / name);
  else if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0')
    places.push_back(fs::path(home) / ".cache" / "llmctl" / "models" / name);
  places.push_back(fs::path(LLMCTL_SOURCE_DIR) / "models" / name);
  for (const fs::path& p : places)
    if (fs::exists(p)) return p.string();
  const std::string what = "model not fetched: " + name + " (run scripts/fetch-models.sh)";
  const char* required = std::getenv("LLMCTL_REQUIRE_FETCHED_MODELS");
  if (required != nullptr && std::string(required) == "1") FAIL(what);
  std::fprintf(stderr, "SKIPPED: %s\n", what.c_str());
  std::fflush(nullptr);
  std::_Exit(77);
}

namespace {
struct TempDir {
  std::string path;
  TempDir() {
    std::string templ = (fs::temp_directory_path() / "llmctl-test-XXXXXX").string();
    if (mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path = templ;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};
}  // namespace

std::string temp_dir() {
  static TempDir dir;
  return dir.path;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

bool temp_file_beside(const std::string& path) {
  const fs::path p(path);
  const std::string prefix = p.filename().string() + ".tmp";
  const fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  if (!fs::is_directory(dir)) return false;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind(prefix, 0) == 0) return true;
  return false;
}

}  // namespace llmctl::test
