// SafetensorsCheckpoint (safetensors.h): one model.safetensors, or the shards listed by
// model.safetensors.index.json, with one name -> file lookup table.
#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/json_error.h"
#include "io/safetensors.h"

namespace llmctl {

namespace {

constexpr uint64_t kMaxIndexBytes = 64ull << 20;  // real indexes are tens of KB

// A shard name must stay inside the model directory: a plain file name, nothing else.
bool plain_file_name(const std::string& s) {
  return !s.empty() && s != "." && s != ".." && s.find('/') == std::string::npos &&
         s.find('\\') == std::string::npos && s.find('\0') == std::string::npos;
}

nlohmann::json read_index(const std::string& path) {
  const MappedFile m(path);
  if (m.size() > kMaxIndexBytes)
    throw FileError(path, fmt::format("{} bytes is more than the {} an index may have", m.size(),
                                      kMaxIndexBytes));
  const char* text = reinterpret_cast<const char*>(m.data());
  try {
    return nlohmann::json::parse(text, text + m.size());
  } catch (const nlohmann::json::parse_error& e) {
    throw FileError(path, fmt::format("not valid JSON: {}", json_error_text(e.what())), e.byte > 0 ? e.byte - 1 : 0);
  } catch (const nlohmann::json::exception& e) {
    // out_of_range 406: a number like 1e400 that overflows a double.
    throw FileError(path, fmt::format("not usable JSON: {}", json_error_text(e.what())));
  }
}

}  // namespace

SafetensorsCheckpoint SafetensorsCheckpoint::open_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  const std::string index_path = (fs::path(dir) / "model.safetensors.index.json").string();
  const std::string single_path = (fs::path(dir) / "model.safetensors").string();
  SafetensorsCheckpoint c;
  if (!fs::exists(index_path)) {
    if (!fs::exists(single_path))
      throw FileError(dir, "no model.safetensors or model.safetensors.index.json in the directory");
    std::vector<SafetensorsFile> files;
    files.push_back(SafetensorsFile::open(single_path));
    return from_files(std::move(files));
  }

  const nlohmann::json index = read_index(index_path);
  const auto map_it = index.is_object() ? index.find("weight_map") : index.end();
  if (map_it == index.end() || !map_it->is_object())
    throw FileError(index_path, "expected a JSON object with a \"weight_map\" object");
  std::map<std::string, size_t> shard_index;  // shard file name -> files_ index
  for (const auto& [tensor, shard] : map_it->items()) {
    if (!shard.is_string() || !plain_file_name(shard.get<std::string>()))
      throw FileError(index_path, fmt::format("weight_map '{}' is {}, expected a file name in the "
                                              "model directory",
                                              tensor, shard.dump().substr(0, 80)));
    const auto [it, added] = shard_index.emplace(shard.get<std::string>(), c.files_.size());
    if (added) c.files_.push_back(SafetensorsFile::open((fs::path(dir) / it->first).string()));
    if (c.files_[it->second].find(tensor) == nullptr)
      throw FileError(index_path, fmt::format("weight_map places tensor '{}' in {}, which does not "
                                              "hold it",
                                              tensor, it->first));
    c.index_.emplace(tensor, it->second);
  }
  if (c.files_.empty()) throw FileError(index_path, "weight_map lists no tensors");
  return c;
}

SafetensorsCheckpoint SafetensorsCheckpoint::from_files(std::vector<SafetensorsFile> files) {
  SafetensorsCheckpoint c;
  c.files_ = std::move(files);
  for (size_t i = 0; i < c.files_.size(); ++i)
    for (const SafetensorsTensor& t : c.files_[i].tensors())
      if (!c.index_.emplace(t.name, i).second)
        throw FileError(c.files_[i].path(),
                        fmt::format("tensor '{}' is also in {}", t.name,
                                    c.files_[c.index_.find(t.name)->second].path()));
  return c;
}

const SafetensorsTensor* SafetensorsCheckpoint::find(std::string_view name,
                                                     const SafetensorsFile** file) const {
  const auto it = index_.find(name);
  if (it == index_.end()) return nullptr;
  if (file != nullptr) *file = &files_[it->second];
  return files_[it->second].find(name);
}

const std::string& SafetensorsCheckpoint::path_of(std::string_view name) const {
  static const std::string none;
  const auto it = index_.find(name);
  if (it != index_.end()) return files_[it->second].path();
  return files_.empty() ? none : files_.front().path();
}

}  // namespace llmctl
