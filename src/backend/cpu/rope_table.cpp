// RopeTables (rope_table.h).
#include "backend/cpu/rope_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/rope_math.h"

namespace llmctl::cpu {

// 144 bytes today: a new field fails this, as a reminder that RopeParams::same_angles (the
// cache key) must compare it if it changes the angles; then update the size.
static_assert(sizeof(RopeParams) == 144, "RopeParams changed: does same_angles compare it?");

namespace {

// freq_factors is an F32 vector in host memory on the CPU backends (Backend::rope checks
// it), possibly not float-aligned in the mapping (general.alignment < 4): memcpy.
float factor_at(const RopeParams& p, int64_t i) {
  if (!p.freq_factors.present()) return 1.0f;
  float v;
  std::memcpy(&v, static_cast<const uint8_t*>(p.freq_factors.data) + i * 4, sizeof v);
  return v;
}

std::vector<float> factor_values(const RopeParams& p) {
  std::vector<float> f;
  if (p.freq_factors.present())
    for (int64_t i = 0; i < p.n_rot / 2; ++i) f.push_back(factor_at(p, i));
  return f;
}

}  // namespace

void rope_cos_sin(const RopeParams& p, int32_t pos, float* cs) {
  for (int64_t i = 0; i < p.n_rot / 2; ++i) {
    const double theta = rope_angle(pos, i, p.n_rot, p.freq_base, p.freq_scale,
                                    static_cast<double>(factor_at(p, i)), p.ext_factor,
                                    p.yarn_low, p.yarn_high);
    cs[2 * i] = static_cast<float>(std::cos(theta) * p.mscale);
    cs[2 * i + 1] = static_cast<float>(std::sin(theta) * p.mscale);
  }
}

const float* RopeTables::Table::row(int32_t pos, float* scratch) const {
  if (pos < static_cast<int64_t>(filled.size()) && filled[static_cast<size_t>(pos)] != 0)
    return cs.data() + static_cast<size_t>(pos) * static_cast<size_t>(n_cs);
  rope_cos_sin(params, pos, scratch);
  return scratch;
}

const RopeTables::Table& RopeTables::prepare(const RopeParams& p, const int32_t* positions,
                                             int64_t n) {
  const std::vector<float> factors = factor_values(p);
  auto it = std::find_if(tables_.begin(), tables_.end(), [&](const Table& t) {
    return t.params.same_angles(p) && t.factors == factors;
  });
  if (it == tables_.end()) {
    if (tables_.size() == kMaxTables)
      tables_.erase(std::min_element(tables_.begin(), tables_.end(),
                                     [](const Table& a, const Table& b) {
                                       return a.last_use < b.last_use;
                                     }));
    Table t;
    t.params = p;
    t.factors = factors;
    // From now on the factors are read from the table's own copy (moving a Table keeps the
    // vector's storage, so the address stays valid).
    t.params.freq_factors.data = t.factors.empty() ? nullptr : t.factors.data();
    t.n_cs = p.n_rot;
    t.cap = t.n_cs > 0 ? kMaxTableBytes / (t.n_cs * static_cast<int64_t>(sizeof(float))) : 0;
    tables_.push_back(std::move(t));
    it = tables_.end() - 1;
  }
  Table& t = *it;
  t.last_use = ++clock_;
  for (int64_t k = 0; k < n; ++k) {
    const int32_t pos = positions[k];
    if (pos < 0) throw Error(fmt::format("backend rope: position {} is negative", pos));
    if (pos >= t.cap) continue;
    const size_t up = static_cast<size_t>(pos);
    if (up >= t.filled.size()) {
      t.filled.resize(up + 1, 0);
      t.cs.resize((up + 1) * static_cast<size_t>(t.n_cs));
    }
    if (t.filled[up] == 0) {
      rope_cos_sin(t.params, pos, t.cs.data() + up * static_cast<size_t>(t.n_cs));
      t.filled[up] = 1;
    }
  }
  return t;
}

}  // namespace llmctl::cpu
