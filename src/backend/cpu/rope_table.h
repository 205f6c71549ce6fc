#pragma once
// cos/sin of the RoPE angles per (position, pair), kept across calls: every layer rotates q
// and k at the same positions with the same parameters, and recomputing rope_angle (a pow
// and a sincos in double per pair) for each of them was ~6 % of a Gemma 3 prefill.
//
// A table holds, for one set of angle parameters (RopeParams::same_angles), the values
// rope_rows would compute: cs[2 i] = float(cos(theta(pos, i)) * mscale), cs[2 i + 1] = the sin,
// so a rotation reads the same floats as before and gives the same bits. Positions below a
// cap (kMaxTableBytes per table) are filled on first use; higher ones are computed per call.
// A few tables are kept (Gemma 3: a local and a global base), the oldest one dropped first.
//
// Not thread-safe: prepare() (which fills) runs on one thread, then row() may be read from any.

#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace llmctl::cpu {

// cs (2 * n_rot / 2,) for one position: the computation the table caches.
void rope_cos_sin(const RopeParams& p, int32_t pos, float* cs);

class RopeTables {
 public:
  // The table for p with every position of positions[t0 .. t1) that is below its cap filled.
  // Throws Error for a negative position.
  class Table;
  const Table& prepare(const RopeParams& p, const int32_t* positions, int64_t n);

  class Table {
   public:
    Table() = default;
    Table(Table&&) = default;  // keeps `factors`' storage, which params points into
    Table& operator=(Table&&) = default;
    Table(const Table&) = delete;
    Table& operator=(const Table&) = delete;

    // cs of position pos: from the table when cached, else computed into `scratch`
    // (2 * n_rot / 2 floats) and returned from there.
    const float* row(int32_t pos, float* scratch) const;

   private:
    friend class RopeTables;
    RopeParams params;
    std::vector<float> factors;  // freq_factors' values: the key, not only their address
    int64_t n_cs = 0;            // floats per position (n_rot)
    int64_t cap = 0;             // positions that may be cached
    std::vector<float> cs;       // (filled positions, n_cs), grown on demand
    std::vector<uint8_t> filled;
    uint64_t last_use = 0;
  };

 private:
  static constexpr size_t kMaxTables = 4;
  static constexpr int64_t kMaxTableBytes = 16 << 20;
  std::vector<Table> tables_;
  uint64_t clock_ = 0;
};

}  // namespace llmctl::cpu
