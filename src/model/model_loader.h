#pragma once
// One entry point for every model format llmctl reads:
//   a GGUF file                      -> config_from_gguf + bind_weights (views into the mmap)
//   a Hugging Face model directory   -> config.json + model.safetensors[.index.json]
//                                       (hf_config.h, hf_weights.h; views into the mmaps)
// The result owns everything its views point into, so it can be moved and returned freely.
//
// Use (e.g. `llmctl run`):
//   LoadedModel m = load_model(path);
//   Forward fwd(m.config, m.weights, backend, n_ctx);
//   Tokenizer tok = m.gguf ? Tokenizer::from_gguf(*m.gguf)
//                          : Tokenizer::from_file(m.tokenizer_path);  // "" -> no tokenizer

#include <memory>
#include <string>

#include "io/gguf.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "model/hf_config.h"
#include "model/hf_weights.h"
#include "model/weights.h"

namespace llmctl {

struct LoadedModel {
  std::string format;  // "gguf" or "hf"
  std::string path;    // the file or directory given to load_model
  ModelConfig config;
  ModelWeights weights;  // views into the storage below
  // Where the vocabulary is: the GGUF file itself, or DIR/tokenizer.model when the directory
  // has one; "" when there is none (a HF directory with only tokenizer.json, say).
  std::string tokenizer_path;

  // GGUF only: the opened file (metadata for the CLI; the mapping the views point into).
  std::shared_ptr<const GgufFile> gguf;
  // HF only: config.json as read, the safetensors mappings and the arrays made at load.
  HfConfig hf;
  std::shared_ptr<const SafetensorsCheckpoint> safetensors;
  std::shared_ptr<const OwnedArrays> owned;
};

// A directory -> Hugging Face; anything else -> GGUF. Throws FileError for a missing path,
// a directory without config.json, an architecture other than the supported ones (the
// message lists them), and every check of the readers and binders.
LoadedModel load_model(const std::string& path);
LoadedModel load_gguf_model(const std::string& path);
LoadedModel load_hf_model(const std::string& dir);

}  // namespace llmctl
