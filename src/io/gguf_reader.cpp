// GGUF v2/v3 parser. Layout (little-endian):
//   header:  "GGUF" u32 version, u64 n_tensors, u64 n_kv
//   n_kv x   {string key, u32 value type, value}          string = u64 length + bytes
//   n_tensors x {string name, u32 n_dims, i64 dims[n_dims], u32 ggml type, u64 offset}
//   padding to `general.alignment` (default 32), then the data section; tensor offsets are
//   relative to it.
// Every count, length and offset read from the file is checked against the bytes that are
// actually there before it is used to index or to reserve memory.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "core/error.h"
#include "io/gguf_parser.h"

// GGUF is little-endian and fields are read with memcpy in host order.
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the GGUF reader assumes a little-endian host"
#endif

namespace llmctl {

namespace {

constexpr uint64_t kDefaultAlignment = 32;
// Smallest encodings, used to bound counts by the bytes left before reserving anything.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;             // empty key, type, 1-byte value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;  // empty name, 1 dim, type, offset

// Bytes one element of `t` takes at least in the file (a string is its 8-byte length, an
// array its 4-byte type and 8-byte count); 0 for an unknown type.
uint64_t min_encoded_size(uint32_t t) {
  switch (static_cast<GgufValueType>(t)) {
    case GgufValueType::UINT8: case GgufValueType::INT8: case GgufValueType::BOOL: return 1;
    case GgufValueType::UINT16: case GgufValueType::INT16: return 2;
    case GgufValueType::UINT32: case GgufValueType::INT32: case GgufValueType::FLOAT32: return 4;
    case GgufValueType::UINT64: case GgufValueType::INT64: case GgufValueType::FLOAT64: return 8;
    case GgufValueType::STRING: return 8;
    case GgufValueType::ARRAY: return 12;
  }
  return 0;
}

// A key or tensor name from the file as it appears in an error message: control bytes
// escaped (no terminal escapes from a hostile file), cut after 80 bytes.
std::string shown(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < 80; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) out += fmt::format("\\x{:02x}", c);
    else out += static_cast<char>(c);
  }
  if (s.size() > 80) out += "...";
  return out;
}

class Cursor {
 public:
  Cursor(const std::string& path, const uint8_t* data, uint64_t size)
      : path_(path), data_(data), size_(size) {}

  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }
  void seek(uint64_t p) { pos_ = p; }

  [[noreturn]] void fail(const std::string& what, uint64_t at) const {
    throw FileError(path_, what, at);
  }

  void need(uint64_t n, const char* what) const {
    if (n > left())
      fail(fmt::format("unexpected end of file reading {}: needs {} bytes, {} left", what, n,
                       left()),
           pos_);
  }

  template <class T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof v);
    pos_ += sizeof v;
    return v;
  }

  // A GGUF string: u64 length then that many bytes (not NUL-terminated), as a view into the
  // file image.
  std::string_view read_string_view(const char* what, uint64_t max_len = UINT64_MAX) {
    const uint64_t at = pos_;
    const uint64_t len = read<uint64_t>(what);
    if (len > max_len) fail(fmt::format("{} length {} exceeds the limit of {}", what, len, max_len), at);
    if (len > left())
      fail(fmt::format("{} length {} runs past the end of the file ({} bytes left)", what, len,
                       left()),
           at);
    std::string_view s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(len));
    pos_ += len;
    return s;
  }
  std::string read_string(const char* what, uint64_t max_len = UINT64_MAX) {
    return std::string(read_string_view(what, max_len));
  }

  // The next n bytes (checked to be there), consumed.
  const uint8_t* take(uint64_t n, const char* what) {
    need(n, what);
    const uint8_t* p = data_ + pos_;
    pos_ += n;
    return p;
  }

 private:
  const std::string& path_;
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

// What the parser produces; GgufParser moves it into the GgufFile.
struct Parsed {
  std::string path_;
  uint32_t version_ = 0;
  uint64_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<GgufKV> kv_;
  std::vector<GgufTensorInfo> tensors_;

  const GgufValue* find(std::string_view key) const {
    for (const auto& kv : kv_)
      if (kv.key == key) return &kv.value;
    return nullptr;
  }
};

class Parser {
 public:
  Parser(Parsed& out, Cursor& cur) : out_(out), cur_(cur) {}

  void header(uint64_t& n_tensors, uint64_t& n_kv, uint32_t& version) {
    cur_.need(4, "magic");
    const uint32_t magic = cur_.read<uint32_t>("magic");
    if (magic != 0x46554747u) {  // "GGUF" read little-endian
      uint8_t b[4];
      std::memcpy(b, &magic, 4);
      cur_.fail(fmt::format("not a GGUF file: magic is {:02x} {:02x} {:02x} {:02x}, expected "
                            "47 47 55 46 (\"GGUF\")",
                            b[0], b[1], b[2], b[3]),
                0);
    }
    version = cur_.read<uint32_t>("version");
    if (version == 1)
      throw FileError(out_.path_, "GGUF version 1 is not supported (only 2 and 3)", 4,
                      "v1 files predate August 2023; re-convert the model with a current llama.cpp");
    if (version != 2 && version != 3) {
      const uint32_t swapped = ((version & 0xffu) << 24) | ((version & 0xff00u) << 8) |
                               ((version >> 8) & 0xff00u) | (version >> 24);
      throw FileError(out_.path_, fmt::format("unknown GGUF version {} (supported: 2, 3)", version), 4,
                      (swapped == 2 || swapped == 3) ? "this looks like a big-endian GGUF file, "
                                                       "which llmctl does not read"
                                                     : std::string());
    }
    uint64_t at = cur_.pos();
    n_tensors = cur_.read<uint64_t>("tensor count");
    // Each tensor info and key/value needs some minimum number of bytes; a count the file
    // cannot hold is rejected before anything is reserved for it.
    if (n_tensors > cur_.left() / kMinTensorInfoBytes)
      cur_.fail(fmt::format("tensor count {} cannot fit in the {} bytes left in the file",
                            n_tensors, cur_.left()),
                at);
    at = cur_.pos();
    n_kv = cur_.read<uint64_t>("metadata key/value count");
    if (n_kv > cur_.left() / kMinKvBytes)
      cur_.fail(fmt::format("metadata count {} cannot fit in the {} bytes left in the file", n_kv,
                            cur_.left()),
                at);
  }

  void metadata(uint64_t n_kv) {
    std::unordered_set<std::string> seen;
    out_.kv_.reserve(static_cast<size_t>(n_kv));
    for (uint64_t i = 0; i < n_kv; ++i) {
      const uint64_t at = cur_.pos();
      GgufKV kv;
      kv.key = cur_.read_string("metadata key", kGgufMaxKeyLength);
      if (kv.key.empty()) cur_.fail("empty metadata key", at);
      if (!seen.insert(kv.key).second) cur_.fail(fmt::format("duplicate metadata key '{}'", shown(kv.key)), at);
      const uint64_t type_at = cur_.pos();
      const uint32_t type = cur_.read<uint32_t>("value type");
      if (min_encoded_size(type) == 0)
        cur_.fail(fmt::format("key '{}': unknown value type {}", shown(kv.key), type), type_at);
      if (kv.key == "general.alignment") alignment_at_ = type_at;
      kv.value = value(static_cast<GgufValueType>(type), kv.key, 0);
      out_.kv_.push_back(std::move(kv));
    }
  }

  void alignment() {
    out_.alignment_ = kDefaultAlignment;
    const GgufValue* v = out_.find("general.alignment");
    if (v == nullptr) return;
    if (v->type != GgufValueType::UINT32)
      cur_.fail(fmt::format("general.alignment has type {}, expected u32", gguf_value_type_name(v->type)),
                alignment_at_);
    if (v->u == 0 || (v->u & (v->u - 1)) != 0)
      cur_.fail(fmt::format("general.alignment is {}, expected a power of two", v->u), alignment_at_ + 4);
    out_.alignment_ = v->u;
  }

  void tensor_infos(uint64_t n_tensors) {
    std::unordered_set<std::string> seen;
    out_.tensors_.reserve(static_cast<size_t>(n_tensors));
    offset_pos_.reserve(static_cast<size_t>(n_tensors));
    for (uint64_t i = 0; i < n_tensors; ++i) {
      const uint64_t at = cur_.pos();
      GgufTensorInfo t;
      t.name = cur_.read_string("tensor name");
      if (!seen.insert(t.name).second) cur_.fail(fmt::format("duplicate tensor name '{}'", shown(t.name)), at);
      const uint64_t dims_at = cur_.pos();
      const uint32_t n_dims = cur_.read<uint32_t>("tensor n_dims");
      if (n_dims == 0 || n_dims > kGgufMaxDims)
        cur_.fail(fmt::format("tensor '{}': n_dims is {}, expected 1..{}", shown(t.name), n_dims, kGgufMaxDims),
                  dims_at);
      int64_t n = 1;
      for (uint32_t d = 0; d < n_dims; ++d) {
        const uint64_t dim_at = cur_.pos();
        const int64_t ne = cur_.read<int64_t>("tensor dimension");
        if (ne <= 0)
          cur_.fail(fmt::format("tensor '{}': dimension {} is {}, expected > 0", shown(t.name), d, ne), dim_at);
        if (n > std::numeric_limits<int64_t>::max() / ne)
          cur_.fail(fmt::format("tensor '{}': element count overflows int64 at dimension {}", shown(t.name), d),
                    dim_at);
        n *= ne;
        t.shape.push_back(ne);
      }
      const uint64_t type_at = cur_.pos();
      const uint32_t type = cur_.read<uint32_t>("tensor type");
      const auto traits = ggml_type_traits(type);
      if (!traits) {
        const bool removed = type == 4 || type == 5 || (type >= 31 && type <= 33) || (type >= 36 && type <= 38);
        cur_.fail(fmt::format("tensor '{}': unknown ggml type {}{}", shown(t.name), type,
                              removed ? " (removed from ggml)" : ""),
                  type_at);
      }
      t.type = static_cast<GgmlType>(type);
      if (t.shape[0] % traits->block_size != 0)
        cur_.fail(fmt::format("tensor '{}': row length {} is not a multiple of the {} block size {}",
                              shown(t.name), t.shape[0], traits->name, traits->block_size),
                  dims_at + 4);
      const uint64_t n_blocks = static_cast<uint64_t>(n) / traits->block_size;
      if (n_blocks > UINT64_MAX / traits->type_size)
        cur_.fail(fmt::format("tensor '{}': byte size overflows 64 bits", shown(t.name)), dims_at);
      t.n_bytes = n_blocks * traits->type_size;
      const uint64_t off_at = cur_.pos();
      t.offset = cur_.read<uint64_t>("tensor offset");
      if (t.offset % out_.alignment_ != 0)
        cur_.fail(fmt::format("tensor '{}': data offset {} is not a multiple of the alignment {}",
                              shown(t.name), t.offset, out_.alignment_),
                  off_at);
      offset_pos_.push_back(off_at);
      out_.tensors_.push_back(std::move(t));
    }
  }

  // Places the data section and checks every tensor's byte range against it and the others.
  void data_section(const uint8_t* data, uint64_t size) {
    const uint64_t end_of_infos = cur_.pos();
    const uint64_t a = out_.alignment_;
    // end_of_infos <= size < 2^63 in practice, but keep the arithmetic overflow-proof.
    if (end_of_infos > UINT64_MAX - (a - 1))
      cur_.fail("data section offset overflows", end_of_infos);
    out_.data_offset_ = (end_of_infos + a - 1) / a * a;
    auto& ts = out_.tensors_;
    if (ts.empty()) return;  // a file without tensors may end right after its header
    if (out_.data_offset_ > size)
      cur_.fail(fmt::format("data section would start at byte {}, past the end of the file ({} bytes)",
                            out_.data_offset_, size),
                end_of_infos);
    const uint64_t data_size = size - out_.data_offset_;
    for (size_t i = 0; i < ts.size(); ++i) {
      GgufTensorInfo& t = ts[i];
      if (t.offset > data_size || t.n_bytes > data_size - t.offset)
        cur_.fail(fmt::format("tensor '{}': data [{}, +{}) runs past the end of the {}-byte data section",
                              shown(t.name), t.offset, t.n_bytes, data_size),
                  offset_pos_[i]);
      t.data = data + out_.data_offset_ + t.offset;
    }
    std::vector<size_t> order(ts.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return ts[x].offset < ts[y].offset; });
    for (size_t k = 1; k < order.size(); ++k) {
      const GgufTensorInfo& prev = ts[order[k - 1]];
      const GgufTensorInfo& cur = ts[order[k]];
      if (prev.offset + prev.n_bytes > cur.offset)
        cur_.fail(fmt::format("tensor '{}': data [{}, +{}) overlaps tensor '{}' [{}, +{})", shown(cur.name),
                              cur.offset, cur.n_bytes, shown(prev.name), prev.offset, prev.n_bytes),
                  offset_pos_[order[k]]);
    }
  }

 private:
  GgufValue value(GgufValueType type, const std::string& key, uint32_t depth) {
    GgufValue v;
    v.type = type;
    const uint64_t at = cur_.pos();
    switch (type) {
      case GgufValueType::UINT8: v.u = cur_.read<uint8_t>("u8 value"); break;
      case GgufValueType::INT8: v.i = cur_.read<int8_t>("i8 value"); break;
      case GgufValueType::UINT16: v.u = cur_.read<uint16_t>("u16 value"); break;
      case GgufValueType::INT16: v.i = cur_.read<int16_t>("i16 value"); break;
      case GgufValueType::UINT32: v.u = cur_.read<uint32_t>("u32 value"); break;
      case GgufValueType::INT32: v.i = cur_.read<int32_t>("i32 value"); break;
      case GgufValueType::UINT64: v.u = cur_.read<uint64_t>("u64 value"); break;
      case GgufValueType::INT64: v.i = cur_.read<int64_t>("i64 value"); break;
      case GgufValueType::FLOAT32: v.f = static_cast<double>(cur_.read<float>("f32 value")); break;
      case GgufValueType::FLOAT64: v.f = cur_.read<double>("f64 value"); break;
      case GgufValueType::BOOL: {
        const uint8_t b = cur_.read<uint8_t>("bool value");
        if (b > 1) cur_.fail(fmt::format("key '{}': bool value is {}, expected 0 or 1", shown(key), b), at);
        v.u = b;
        break;
      }
      case GgufValueType::STRING: v.s = cur_.read_string("string value"); break;
      case GgufValueType::ARRAY: array(v, key, depth + 1); break;
    }
    return v;
  }

  void array(GgufValue& v, const std::string& key, uint32_t depth) {
    const uint64_t at = cur_.pos();
    if (depth > kGgufMaxArrayDepth)
      cur_.fail(fmt::format("key '{}': arrays nested deeper than {} levels", shown(key), kGgufMaxArrayDepth), at);
    const uint32_t elem = cur_.read<uint32_t>("array element type");
    const uint64_t min_size = min_encoded_size(elem);
    if (min_size == 0) cur_.fail(fmt::format("key '{}': unknown array element type {}", shown(key), elem), at);
    const auto elem_type = static_cast<GgufValueType>(elem);
    v.arr = GgufArray(elem_type);
    const uint64_t count_at = cur_.pos();
    const uint64_t count = cur_.read<uint64_t>("array length");
    if (count > cur_.left() / min_size)
      cur_.fail(fmt::format("key '{}': array of {} {} elements cannot fit in the {} bytes left", shown(key),
                            count, gguf_value_type_name(elem_type), cur_.left()),
                count_at);
    if (count > kGgufMaxMetadataElements - n_elements_)
      cur_.fail(fmt::format("key '{}': metadata holds more than {} array elements in total (llmctl's limit)",
                            shown(key), kGgufMaxMetadataElements),
                count_at);
    n_elements_ += count;
    v.arr.reserve(static_cast<size_t>(count));
    if (elem_type == GgufValueType::ARRAY) {
      for (uint64_t k = 0; k < count; ++k) {
        GgufValue inner;
        inner.type = GgufValueType::ARRAY;
        array(inner, key, depth + 1);
        v.arr.push_back(inner);
      }
    } else if (elem_type == GgufValueType::STRING) {
      for (uint64_t k = 0; k < count; ++k) v.arr.append_string(cur_.read_string_view("string value"));
    } else {
      // Scalars are copied as they are (the count was checked against the bytes left above).
      const uint64_t n_bytes = count * min_size;
      const uint8_t* bytes = cur_.take(n_bytes, "array elements");
      if (elem_type == GgufValueType::BOOL) {
        for (uint64_t k = 0; k < count; ++k)
          if (bytes[k] > 1)
            cur_.fail(fmt::format("key '{}': bool value is {}, expected 0 or 1", shown(key), bytes[k]),
                      cur_.pos() - n_bytes + k);
      }
      v.arr.append_scalars(bytes, static_cast<size_t>(count));
    }
  }

  Parsed& out_;
  Cursor& cur_;
  std::vector<uint64_t> offset_pos_;  // where each tensor's offset field is, for errors
  uint64_t alignment_at_ = 0;         // where general.alignment's type field is
  uint64_t n_elements_ = 0;
};

}  // namespace

void GgufParser::parse(GgufFile& out, const uint8_t* data, uint64_t size) {
  Parsed parsed;
  parsed.path_ = out.path_;
  Cursor cur(parsed.path_, data, size);
  Parser p(parsed, cur);
  uint64_t n_tensors = 0, n_kv = 0;
  p.header(n_tensors, n_kv, parsed.version_);
  p.metadata(n_kv);
  p.alignment();
  p.tensor_infos(n_tensors);
  p.data_section(data, size);
  out.version_ = parsed.version_;
  out.alignment_ = parsed.alignment_;
  out.data_offset_ = parsed.data_offset_;
  out.file_size_ = size;
  out.kv_ = std::move(parsed.kv_);
  out.tensors_ = std::move(parsed.tensors_);
}

}  // namespace llmctl
