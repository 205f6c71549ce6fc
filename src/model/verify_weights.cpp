// NaN/Inf scan of model weights (verify_weights.h). Each tensor is scanned in chunks with a
// branch-free "any exponent all ones" reduction the compiler vectorizes; only a chunk that
// holds a bad value is searched again for its position, so the common (clean) case is one
// sequential read.
#include "model/verify_weights.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/unaligned.h"
#include "core/fp16.h"
#include "io/gguf.h"
#include "model/model_loader.h"

namespace llmctl {

namespace {

constexpr uint64_t kChunkBytes = 1ull << 20;      // reduction granule
constexpr uint64_t kProgressBytes = 64ull << 20;  // callback granule

// The fp16 scales of a block format: byte offsets within the block and their names.
struct ScaleField {
  uint32_t offset;
  const char* name;
};
struct BlockScales {
  uint32_t n = 0;
  ScaleField fields[2] = {};
  // MXFP4's scale is one E8M0 byte (2^(e - 127)), not an fp16: 0xFF is its NaN, the only
  // value ggml's ggml_validate_row_data rejects (validate_e_e8m0); as ggml, 253 and 254 are
  // accepted although their largest levels (+-8, +-12 times 2^(e - 128)) overflow to Inf.
  bool e8m0 = false;
};

// Layouts as in ggml-common.h (and dequant.h for the engine types).
std::optional<BlockScales> block_scales(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_0:
    case GgmlType::Q5_0:
    case GgmlType::Q8_0:
    case GgmlType::IQ4_NL:  // {fp16 d; u8 qs[16]}
    case GgmlType::IQ4_XS:  // {fp16 d; u16 scales_h; u8 scales_l[4]; u8 qs[128]}
      return BlockScales{1, {{0, "d"}, {}}};
    case GgmlType::Q4_1:
    case GgmlType::Q5_1:
      return BlockScales{2, {{0, "d"}, {2, "m"}}};
    case GgmlType::Q8_1:  // {fp16 d; fp16 s; i8 qs[32]}
      return BlockScales{2, {{0, "d"}, {2, "s"}}};
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
      return BlockScales{2, {{0, "d"}, {2, "dmin"}}};
    case GgmlType::Q2_K:  // {u8 scales[16]; u8 qs[64]; fp16 d; fp16 dmin}
      return BlockScales{2, {{80, "d"}, {82, "dmin"}}};
    case GgmlType::Q3_K:  // {u8 hmask[32]; u8 qs[64]; u8 scales[12]; fp16 d}
      return BlockScales{1, {{108, "d"}, {}}};
    case GgmlType::Q6_K:  // {u8 ql[128]; u8 qh[64]; i8 scales[16]; fp16 d}
      return BlockScales{1, {{208, "d"}, {}}};
    case GgmlType::MXFP4:  // {u8 e (E8M0); u8 qs[16]}
      return BlockScales{1, {{0, "e"}, {}}, true};
    default:
      return std::nullopt;
  }
}

bool is_integer_type(GgmlType t) {
  return t == GgmlType::I8 || t == GgmlType::I16 || t == GgmlType::I32 || t == GgmlType::I64;
}

// Plain float types: element width and the exponent mask (all ones = Inf or NaN).
struct FloatLayout {
  uint32_t width;
  uint64_t exp_mask;
};
std::optional<FloatLayout> float_layout(GgmlType t) {
  switch (t) {
    case GgmlType::F32:
      return FloatLayout{4, 0x7f800000u};
    case GgmlType::F16:
      return FloatLayout{2, 0x7c00u};
    case GgmlType::BF16:
      return FloatLayout{2, 0x7f80u};
    case GgmlType::F64:
      return FloatLayout{8, 0x7ff0000000000000ull};
    default:
      return std::nullopt;
  }
}

// Whether any of n elements of width sizeof(U) starting at p has its exponent all ones.
template <class U>
bool any_nonfinite(const uint8_t* p, uint64_t n, U mask) {
  U hit = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const U v = load_unaligned<U>(p + i * sizeof(U));
    hit |= static_cast<U>((v & mask) == mask);
  }
  return hit != 0;
}

bool element_nonfinite(const uint8_t* p, const FloatLayout& f) {
  switch (f.width) {
    case 2:
      return (load_unaligned<uint16_t>(p) & f.exp_mask) == f.exp_mask;
    case 4:
      return (load_unaligned<uint32_t>(p) & f.exp_mask) == f.exp_mask;
    default:
      return (load_unaligned<uint64_t>(p) & f.exp_mask) == f.exp_mask;
  }
}

bool range_nonfinite(const uint8_t* p, uint64_t n, const FloatLayout& f) {
  switch (f.width) {
    case 2:
      return any_nonfinite<uint16_t>(p, n, static_cast<uint16_t>(f.exp_mask));
    case 4:
      return any_nonfinite<uint32_t>(p, n, static_cast<uint32_t>(f.exp_mask));
    default:
      return any_nonfinite<uint64_t>(p, n, f.exp_mask);
  }
}

float as_float(const uint8_t* p, GgmlType t) {
  switch (t) {
    case GgmlType::F32:
      return load_unaligned<float>(p);
    case GgmlType::F16:
      return fp16_to_f32(load_unaligned<uint16_t>(p));
    case GgmlType::BF16:
      return bits_to_f32(static_cast<uint32_t>(load_unaligned<uint16_t>(p)) << 16);
    default:
      return static_cast<float>(load_unaligned<double>(p));
  }
}

WeightFault fault_at(const WeightTensorRef& t, int64_t element) {
  WeightFault f;
  f.tensor = t.name;
  f.type = t.type;
  f.shape = t.shape;
  const int64_t row_len = t.shape.empty() ? 1 : std::max<int64_t>(t.shape[0], 1);
  f.row = element / row_len;
  f.column = element % row_len;
  return f;
}

// Tracks bytes done across tensors and calls the progress callback every kProgressBytes.
struct Progress {
  const VerifyProgress& cb;
  uint64_t total = 0;
  uint64_t done = 0;
  uint64_t next = kProgressBytes;
  void add(uint64_t n) {
    done += n;
    if (cb && done >= next) {
      cb(done, total);
      next = done + kProgressBytes;
    }
  }
};

// Plain floats: chunked reduction, then the exact element in the chunk that failed.
std::optional<WeightFault> scan_floats(const WeightTensorRef& t, const FloatLayout& f,
                                       VerifyResult& r, Progress& pr) {
  const uint64_t n = t.n_bytes / f.width;
  const uint64_t chunk = kChunkBytes / f.width;
  for (uint64_t begin = 0; begin < n; begin += chunk) {
    const uint64_t m = std::min(chunk, n - begin);
    const uint8_t* p = t.data + begin * f.width;
    r.n_values += m;
    pr.add(m * f.width);
    if (!range_nonfinite(p, m, f)) continue;
    for (uint64_t i = 0; i < m; ++i) {
      if (!element_nonfinite(p + i * f.width, f)) continue;
      WeightFault w = fault_at(t, static_cast<int64_t>(begin + i));
      w.field = "value";
      w.value = as_float(p + i * f.width, t.type);
      return w;
    }
  }
  return std::nullopt;
}

// Whether the scale at p is NaN or Inf: an fp16 with its exponent all ones, or E8M0 0xFF.
bool scale_nonfinite(const uint8_t* p, bool e8m0) {
  if (e8m0) return *p == 0xffu;
  return (load_unaligned<uint16_t>(p) & 0x7c00u) == 0x7c00u;
}

// Block types: the scales of every block.
std::optional<WeightFault> scan_blocks(const WeightTensorRef& t, const BlockScales& s,
                                       VerifyResult& r, Progress& pr) {
  const GgmlTypeTraits tr = ggml_traits(t.type);
  const uint64_t n_blocks = t.n_bytes / tr.type_size;
  const uint64_t chunk = std::max<uint64_t>(kChunkBytes / tr.type_size, 1);
  for (uint64_t begin = 0; begin < n_blocks; begin += chunk) {
    const uint64_t m = std::min(chunk, n_blocks - begin);
    const uint8_t* p = t.data + begin * tr.type_size;
    uint16_t hit = 0;
    for (uint64_t b = 0; b < m; ++b)
      for (uint32_t k = 0; k < s.n; ++k)
        hit |= static_cast<uint16_t>(
            scale_nonfinite(p + b * tr.type_size + s.fields[k].offset, s.e8m0));
    r.n_values += m * s.n;
    pr.add(m * tr.type_size);
    if (hit == 0) continue;
    for (uint64_t b = 0; b < m; ++b)
      for (uint32_t k = 0; k < s.n; ++k) {
        const uint8_t* at = p + b * tr.type_size + s.fields[k].offset;
        if (!scale_nonfinite(at, s.e8m0)) continue;
        WeightFault w = fault_at(t, static_cast<int64_t>((begin + b) * tr.block_size));
        w.block = w.column / static_cast<int64_t>(tr.block_size);
        w.field = s.fields[k].name;
        w.value = s.e8m0 ? std::nanf("") : fp16_to_f32(load_unaligned<uint16_t>(at));
        return w;
      }
  }
  return std::nullopt;
}

// "[64, 172]", as the weight binder writes shapes (ggml order).
std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string nonfinite_name(float v) {
  if (std::isnan(v)) return "NaN";
  return v > 0 ? "+Inf" : "-Inf";
}

}  // namespace

std::string WeightFault::describe() const {
  const std::string where =
      fmt::format("tensor '{}' ({} {})", tensor, ggml_type_name(type), shape_text(shape));
  if (block < 0)
    return fmt::format("{}: row {}, column {}: value is {}", where, row, column,
                       nonfinite_name(value));
  const int64_t bs = static_cast<int64_t>(ggml_traits(type).block_size);
  return fmt::format("{}: row {}, block {} (elements {}..{}): scale {} is {}", where, row, block,
                     column, column + bs - 1, field, nonfinite_name(value));
}

VerifyResult verify_tensors(const std::vector<WeightTensorRef>& tensors,
                            const VerifyProgress& progress) {
  VerifyResult r;
  Progress pr{progress};
  for (const auto& t : tensors) pr.total += t.n_bytes;
  for (const auto& t : tensors) {
    ++r.n_tensors;
    r.n_bytes += t.n_bytes;
    std::optional<WeightFault> fault;
    if (const auto f = float_layout(t.type)) {
      fault = scan_floats(t, *f, r, pr);
    } else if (const auto s = block_scales(t.type)) {
      fault = scan_blocks(t, *s, r, pr);
    } else {
      pr.add(t.n_bytes);
      if (!is_integer_type(t.type))
        r.unchecked.push_back(fmt::format("{} ({})", t.name, ggml_type_name(t.type)));
    }
    if (fault) {
      r.fault = std::move(fault);
      break;
    }
  }
  if (progress) progress(pr.done, pr.total);
  return r;
}

std::vector<WeightTensorRef> gguf_tensor_refs(const GgufFile& file) {
  std::vector<WeightTensorRef> out;
  out.reserve(file.tensors().size());
  for (const auto& t : file.tensors()) out.push_back({t.name, t.type, t.shape, t.data, t.n_bytes});
  return out;
}

std::vector<WeightTensorRef> model_tensor_refs(const LoadedModel& model) {
  if (model.gguf) return gguf_tensor_refs(*model.gguf);
  std::vector<WeightTensorRef> out;
  if (!model.safetensors) return out;
  for (const auto& f : model.safetensors->files())
    for (const auto& t : f.tensors())
      // safetensors shapes are row-major (last dim contiguous): ggml order is the reverse.
      out.push_back({t.name, t.type, std::vector<int64_t>(t.shape.rbegin(), t.shape.rend()), t.data,
                     t.n_bytes()});
  return out;
}

void verify_model_weights(const LoadedModel& model, const VerifyProgress& progress) {
  const VerifyResult r = verify_tensors(model_tensor_refs(model), progress);
  if (r.fault)
    throw FileError(model.path, r.fault->describe(), FileError::kNoOffset,
                    "the file is damaged or was converted wrongly; download or convert it again");
}

}  // namespace llmctl
