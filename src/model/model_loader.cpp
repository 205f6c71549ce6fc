// load_model (model_loader.h): pick the format by what the path is, then read and bind.
#include "model/model_loader.h"

#include <fmt/format.h>

#include <filesystem>

#include "core/error.h"

namespace llmctl {

namespace fs = std::filesystem;

LoadedModel load_gguf_model(const std::string& path) {
  LoadedModel m;
  m.format = "gguf";
  m.path = path;
  m.gguf = std::make_shared<const GgufFile>(GgufFile::open(path));
  m.config = config_from_gguf(*m.gguf);
  m.weights = bind_weights(*m.gguf, m.config);
  m.tokenizer_path = path;
  return m;
}

LoadedModel load_hf_model(const std::string& dir) {
  const fs::path d(dir);
  const std::string config_path = (d / "config.json").string();
  if (!fs::exists(config_path))
    throw FileError(dir, "no config.json: not a Hugging Face model directory");
  LoadedModel m;
  m.format = "hf";
  m.path = dir;
  m.hf = read_hf_config(config_path);
  m.config = m.hf.config;
  auto checkpoint = std::make_shared<SafetensorsCheckpoint>(SafetensorsCheckpoint::open_dir(dir));
  auto owned = std::make_shared<OwnedArrays>();
  m.weights = bind_hf_weights(*checkpoint, m.hf, *owned);
  m.safetensors = std::move(checkpoint);
  m.owned = std::move(owned);
  // sentencepiece first; a directory with only tokenizer.json (Llama 3, Qwen2.5, SmolLM2)
  // gets it (Tokenizer::from_file tells the two apart by content).
  const fs::path sp = d / "tokenizer.model";
  const fs::path hf_json = d / "tokenizer.json";
  if (fs::exists(sp))
    m.tokenizer_path = sp.string();
  else if (fs::exists(hf_json))
    m.tokenizer_path = hf_json.string();
  return m;
}

LoadedModel load_model(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st))
    throw FileError(path, "no such file or directory", FileError::kNoOffset,
                    "give a GGUF file or a Hugging Face model directory (config.json + "
                    "model.safetensors)");
  if (fs::is_directory(st)) return load_hf_model(path);
  return load_gguf_model(path);
}

}  // namespace llmctl
