#include "support/hf_dirs.h"

#include <filesystem>

#include "core/error.h"
#include "model/model_loader.h"
#include "support/fixtures.h"
#include "support/test_data.h"

namespace fs = std::filesystem;

namespace llmctl::test {

std::string edited_hf_copy(const std::string& fixture, const std::string& tag,
                           const std::function<void(nlohmann::json&)>& edit) {
  const std::string dir = temp_dir() + "/" + tag;
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(fixture_path(fixture)))
    fs::copy_file(e.path(), dir + "/" + e.path().filename().string(),
                  fs::copy_options::overwrite_existing);
  nlohmann::json cfg = nlohmann::json::parse(read_file(dir + "/config.json"));
  edit(cfg);
  write_file(dir + "/config.json", cfg.dump(2));
  return dir;
}

std::string load_model_error(const std::string& path) {
  try {
    load_model(path);
  } catch (const FileError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace llmctl::test
