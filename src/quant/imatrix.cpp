// The importance matrix (imatrix.h): accumulation, and its GGUF file as llama.cpp's
// llama-imatrix writes it (tools/imatrix/imatrix.cpp, "GGUF imatrix" format):
//   general.type = "imatrix", imatrix.datasets (string array), imatrix.chunk_count and
//   imatrix.chunk_size (u32), and per weight W two F32 tensors
//     "W.in_sum2"  ggml shape [n_cols, n_mat]   sum of x_j^2 over the rows seen
//     "W.counts"   ggml shape [1, n_mat]        rows seen
//   where n_mat > 1 only for mixture-of-experts weights (one slice per expert). We write
//   n_mat = 1 (dense Llama-family weights) and read 1-D or n_mat = 1 tensors; a file with
//   expert slices is refused with a message rather than averaged silently.

#include "quant/imatrix.h"

#include <cmath>
#include <cstring>
#include <set>

#include "core/error.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"

namespace llmctl {

namespace {

constexpr const char* kSumSuffix = ".in_sum2";
constexpr const char* kCountSuffix = ".counts";
constexpr const char* kKeyType = "general.type";
constexpr const char* kKeyDatasets = "imatrix.datasets";
constexpr const char* kKeyChunkCount = "imatrix.chunk_count";
constexpr const char* kKeyChunkSize = "imatrix.chunk_size";
// Counts are stored as F32: integers above 2^24 are not all representable, so a count is
// only required to be integral and no larger than int64 can hold comfortably.
constexpr double kMaxCount = 9.0e15;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() > suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(float));
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// The F32 values of tensor `t`, after checking its type and that it is 1-D or [n, 1].
std::vector<float> read_f32_vector(const std::string& path, const GgufTensorInfo& t) {
  if (t.type != GgmlType::F32)
    throw FileError(path, fmt::format("imatrix tensor '{}': expected F32, got {}", t.name,
                                      ggml_type_name(t.type)));
  if (t.shape.empty() || t.shape.size() > 2)
    throw FileError(path, fmt::format("imatrix tensor '{}': expected 1 or 2 dimensions, got {}",
                                      t.name, t.shape.size()));
  if (t.shape.size() == 2 && t.shape[1] != 1)
    throw FileError(path, fmt::format("imatrix tensor '{}': shape [{}] has {} expert slices; only "
                                      "dense weights (one slice) are supported",
                                      t.name, fmt::join(t.shape, ", "), t.shape[1]));
  const int64_t n = t.shape[0];
  if (n <= 0 || t.n_bytes != static_cast<uint64_t>(n) * sizeof(float) || t.data == nullptr)
    throw FileError(path, fmt::format("imatrix tensor '{}': shape [{}] does not match its {} bytes",
                                      t.name, fmt::join(t.shape, ", "), t.n_bytes));
  std::vector<float> v(static_cast<size_t>(n));
  std::memcpy(v.data(), t.data, t.n_bytes);
  return v;
}

int64_t read_count(const std::string& path, const GgufTensorInfo& t) {
  const std::vector<float> c = read_f32_vector(path, t);
  if (c.size() != 1)
    throw FileError(path,
                    fmt::format("imatrix tensor '{}': expected 1 count, got {}", t.name, c.size()));
  const double v = c[0];
  if (!std::isfinite(v) || v < 0.0 || v != std::floor(v) || v > kMaxCount)
    throw FileError(path, fmt::format("imatrix tensor '{}': expected a non-negative whole number "
                                      "of rows, got {}",
                                      t.name, v));
  return static_cast<int64_t>(v);
}

int64_t read_u32_key(const GgufFile& f, const char* key) {
  const GgufValue* v = f.find(key);
  if (v == nullptr) return 0;
  if (!v->is_integer() || v->as_int() < 0 || v->as_int() > static_cast<int64_t>(UINT32_MAX))
    throw FileError(f.path(), fmt::format("'{}': expected a non-negative u32", key));
  return v->as_int();
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Accumulation
// ---------------------------------------------------------------------------------------------

void ImportanceMatrix::add(const std::string& name, const float* x, int64_t n_rows,
                           int64_t n_cols) {
  if (n_cols <= 0 || n_rows < 0)
    throw Error(
        fmt::format("imatrix '{}': bad block of {} rows x {} columns", name, n_rows, n_cols));
  Entry& e = entries[name];
  if (e.sum_sq.empty()) e.sum_sq.assign(static_cast<size_t>(n_cols), 0.0);
  if (static_cast<int64_t>(e.sum_sq.size()) != n_cols)
    throw Error(fmt::format("imatrix '{}': rows of {} columns, but {} columns were seen before",
                            name, n_cols, e.sum_sq.size()));
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* row = x + r * n_cols;
    for (int64_t j = 0; j < n_cols; ++j) {
      const double v = row[j];
      e.sum_sq[static_cast<size_t>(j)] += v * v;
    }
  }
  e.n_rows += n_rows;
  // A NaN or infinity in the activations would make the file unreadable; say so here, where
  // the weight is known, rather than at load time.
  for (double s : e.sum_sq)
    if (!std::isfinite(s))
      throw Error(fmt::format("imatrix '{}': non-finite activation in its input", name));
}

std::vector<float> ImportanceMatrix::column_weights(const std::string& name, int64_t n_cols) const {
  const auto it = entries.find(name);
  if (it == entries.end() || it->second.n_rows == 0) return {};
  const Entry& e = it->second;
  if (static_cast<int64_t>(e.sum_sq.size()) != n_cols)
    throw Error(fmt::format("imatrix '{}': has {} columns, the weight has {}", name,
                            e.sum_sq.size(), n_cols),
                "was the importance matrix made from another model?");
  std::vector<float> w(e.sum_sq.size());
  const auto count = static_cast<float>(e.n_rows);
  for (size_t j = 0; j < w.size(); ++j) w[j] = static_cast<float>(e.sum_sq[j]) / count;
  return w;
}

// ---------------------------------------------------------------------------------------------
// File
// ---------------------------------------------------------------------------------------------

void save_imatrix(const std::string& path, const ImportanceMatrix& m) {
  if (m.chunk_count < 0 || m.chunk_count > static_cast<int64_t>(UINT32_MAX) || m.chunk_size < 0 ||
      m.chunk_size > static_cast<int64_t>(UINT32_MAX))
    throw FileError(path, fmt::format("chunk count {} / size {} do not fit a u32", m.chunk_count,
                                      m.chunk_size));
  GgufBuilder b;
  b.set(kKeyType, gguf_value::string("imatrix"));
  b.set(kKeyDatasets, gguf_value::string_array(m.datasets));
  b.set(kKeyChunkCount, gguf_value::u32(static_cast<uint32_t>(m.chunk_count)));
  b.set(kKeyChunkSize, gguf_value::u32(static_cast<uint32_t>(m.chunk_size)));
  for (const auto& [name, e] : m.entries) {
    if (e.sum_sq.empty()) continue;
    std::vector<float> sums(e.sum_sq.size());
    for (size_t j = 0; j < sums.size(); ++j) {
      sums[j] = static_cast<float>(e.sum_sq[j]);
      if (!std::isfinite(sums[j]) || sums[j] < 0.0f)
        throw FileError(path, fmt::format("imatrix '{}': column {} sum {} is not a finite "
                                          "non-negative F32",
                                          name, j, e.sum_sq[j]));
    }
    const auto n_cols = static_cast<int64_t>(sums.size());
    // [n_cols, 1] and [1, 1]: llama.cpp's shapes for a dense weight (n_mat = 1).
    b.add_tensor(name + kSumSuffix, GgmlType::F32, {n_cols, 1}, f32_bytes(sums));
    b.add_tensor(name + kCountSuffix, GgmlType::F32, {1, 1},
                 f32_bytes({static_cast<float>(e.n_rows)}));
  }
  b.write(path);
}

ImportanceMatrix load_imatrix(const std::string& path) {
  const GgufFile f = GgufFile::open(path);
  if (const GgufValue* t = f.find(kKeyType)) {
    if (t->type != GgufValueType::STRING || t->s != "imatrix")
      throw FileError(path, fmt::format("general.type: expected \"imatrix\", got \"{}\"", t->s),
                      FileError::kNoOffset,
                      "is this a model file rather than an importance matrix?");
  }
  ImportanceMatrix m;
  if (const GgufValue* d = f.find(kKeyDatasets)) {
    if (d->type != GgufValueType::ARRAY || d->arr.elem_type() != GgufValueType::STRING)
      throw FileError(path, fmt::format("'{}': expected an array of strings", kKeyDatasets));
    m.datasets = f.get_string_array(kKeyDatasets);
  }
  m.chunk_count = read_u32_key(f, kKeyChunkCount);
  m.chunk_size = read_u32_key(f, kKeyChunkSize);

  // Pair every "W.in_sum2" with its "W.counts"; anything else is not an imatrix entry.
  std::set<std::string> counted;
  for (const GgufTensorInfo& t : f.tensors()) {
    if (ends_with(t.name, kCountSuffix)) {
      counted.insert(t.name.substr(0, t.name.size() - std::strlen(kCountSuffix)));
      continue;
    }
    if (!ends_with(t.name, kSumSuffix))
      throw FileError(path,
                      fmt::format("tensor '{}': expected only '<weight>{}' and '<weight>{}' "
                                  "tensors in an importance matrix",
                                  t.name, kSumSuffix, kCountSuffix),
                      FileError::kNoOffset,
                      "is this a model file rather than an importance matrix?");
    const std::string name = t.name.substr(0, t.name.size() - std::strlen(kSumSuffix));
    const GgufTensorInfo* c = f.find_tensor(name + kCountSuffix);
    if (c == nullptr)
      throw FileError(path, fmt::format("imatrix entry '{}': has '{}{}' but no '{}{}'", name, name,
                                        kSumSuffix, name, kCountSuffix));
    const std::vector<float> sums = read_f32_vector(path, t);
    ImportanceMatrix::Entry e;
    e.n_rows = read_count(path, *c);
    for (size_t j = 0; j < sums.size(); ++j) {
      if (!std::isfinite(sums[j]) || sums[j] < 0.0f)
        throw FileError(path, fmt::format("imatrix entry '{}': column {} has sum {}, expected a "
                                          "finite non-negative value",
                                          name, j, sums[j]));
      if (e.n_rows == 0 && sums[j] != 0.0f)
        throw FileError(path, fmt::format("imatrix entry '{}': 0 rows counted but column {} has "
                                          "sum {}",
                                          name, j, sums[j]));
    }
    e.sum_sq.assign(sums.begin(), sums.end());
    m.entries.emplace(name, std::move(e));
  }
  for (const std::string& name : counted)
    if (m.entries.count(name) == 0)
      throw FileError(path, fmt::format("imatrix entry '{}': has '{}{}' but no '{}{}'", name, name,
                                        kCountSuffix, name, kSumSuffix));
  if (m.entries.empty()) throw FileError(path, "no imatrix entries ('<weight>.in_sum2' tensors)");
  return m;
}

}  // namespace llmctl
