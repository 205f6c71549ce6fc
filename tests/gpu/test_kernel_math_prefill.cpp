// kernels/attention_tile_math.cuh on the CPU (no GPU needed): the prefill kernel's geometry
// covers every (token, head) once with at most 16 warps and tiles that fit the shared memory;
// collect_tile_rows against a direct computation; and the kernel's walk (plan, pairs, the tile's
// sequences, staged slots, state j % 4, merge), emulated with those functions, against
//   - an emulation of attention_paged.cu (4 warps, warp w takes positions w, w + 4, ...):
//     bit for bit, NaN heads of bad tokens and skipped bad blocks included;
//   - softmax(q K^T * scale) V in double, within f32 rounding.
// The batch mixes three sequences (interleaved tokens, cached prefixes), a sequence with bad
// blocks and bad tokens. A score here is one float fmaf chain (the lanes' split and shuffle sum
// are the device's business; both emulations share this function).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "backend_pair.h"
#include "kernels/attention_math.cuh"
#include "kernels/attention_tile_math.cuh"
#include "prefill_layout.h"

namespace {

using namespace llmctl::cuda;
using llmctl::test::Layout;
using llmctl::test::make_prefill_layout;
using llmctl::test::random_floats;

// The layout (prefill_layout.h, with its bad tokens and blocks) with random K/V in every pool
// slot and random queries.
struct Cache {
  int64_t n_heads, n_kv_heads, head_dim, block_size, max_blocks, n_slots;
  std::vector<int32_t> table;  // (n_seq_rows, max_blocks)
  std::vector<float> k, v;     // (n_slots, n_kv_heads * head_dim)
  std::vector<int32_t> seq, pos;
  std::vector<float> q;  // (n_tokens, n_heads, head_dim)
  int64_t n_seq_rows() const { return static_cast<int64_t>(table.size()) / max_blocks; }
  int64_t n_tokens() const { return static_cast<int64_t>(seq.size()); }
  float scale() const { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim))); }
};

Cache make_cache(int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, int64_t block_size) {
  const Layout l = make_prefill_layout(block_size, n_kv_heads * head_dim, true);
  Cache c{n_heads, n_kv_heads, head_dim, block_size, l.max_blocks, l.n_blocks * block_size,
          l.table, {},         {},       l.tok_seq,  l.tok_pos,    {}};
  c.k = random_floats(static_cast<size_t>(c.n_slots * n_kv_heads * head_dim), 11);
  c.v = random_floats(c.k.size(), 12);
  c.q = random_floats(static_cast<size_t>(c.n_tokens() * n_heads * head_dim), 13, -2.0f, 2.0f);
  return c;
}

// q . K[slot] (head g) * scale as one fmaf chain.
float score(const Cache& c, const float* qh, int64_t slot, int64_t g) {
  const float* kj = c.k.data() + (slot * c.n_kv_heads + g) * c.head_dim;
  float dot = 0.0f;
  for (int64_t i = 0; i < c.head_dim; ++i) dot = fmaf(qh[i], kj[i], dot);
  return dot * c.scale();
}

// The online softmax states of one (token, head), as registers in both kernels.
struct States {
  float m[kPrefillResidues], l[kPrefillResidues];
  std::vector<float> acc;  // (kPrefillResidues, head_dim)
  explicit States(int64_t head_dim) : acc(static_cast<size_t>(kPrefillResidues * head_dim), 0.0f) {
    for (int w = 0; w < kPrefillResidues; ++w) {
      m[w] = -INFINITY;
      l[w] = 0.0f;
    }
  }
  void add(const Cache& c, int w, float s, int64_t slot, int64_t g) {
    ScoreStats unused = ScoreStats::empty();
    const SoftmaxStep st = online_softmax_step<false>(s, m[w], l[w], unused);
    const float* vj = c.v.data() + (slot * c.n_kv_heads + g) * c.head_dim;
    float* a = acc.data() + int64_t{w} * c.head_dim;
    for (int64_t i = 0; i < c.head_dim; ++i) a[i] = fmaf(st.p, vj[i], a[i] * st.c);
  }
  void write(int64_t head_dim, float* oh) const {
    float big_m = 0.0f, factor[kPrefillResidues];
    const float total = merge_softmax(m, l, kPrefillResidues, big_m, factor);
    const float inv = 1.0f / total;
    for (int64_t i = 0; i < head_dim; ++i) {
      float sum = 0.0f;
      for (int w = 0; w < kPrefillResidues; ++w)
        sum = fmaf(acc[static_cast<size_t>(w * head_dim + i)], factor[w], sum);
      oh[i] = sum * inv;
    }
  }
};

// attention_paged.cu: per (token, head), warp w over positions w, w + 4, ... (its own checks).
std::vector<float> paged(const Cache& c, int& flag) {
  std::vector<float> out(c.q.size());
  const int64_t group = c.n_heads / c.n_kv_heads;
  for (int64_t t = 0; t < c.n_tokens(); ++t) {
    for (int64_t h = 0; h < c.n_heads; ++h) {
      float* oh = out.data() + (t * c.n_heads + h) * c.head_dim;
      const int32_t row = c.seq[static_cast<size_t>(t)], p = c.pos[static_cast<size_t>(t)];
      if (row < 0 || row >= c.n_seq_rows() || p < 0 || p / c.block_size >= c.max_blocks) {
        flag = 1;
        std::fill(oh, oh + c.head_dim, NAN);
        continue;
      }
      States st(c.head_dim);
      for (int w = 0; w < kPrefillResidues; ++w) {
        for (int64_t j = w; j <= p; j += kPrefillResidues) {
          const int32_t b = c.table[static_cast<size_t>(row * c.max_blocks + j / c.block_size)];
          const int64_t slot = int64_t{b} * c.block_size + j % c.block_size;
          if (b < 0 || slot >= c.n_slots) {
            flag = 1;
            continue;
          }
          st.add(c, w, score(c, c.q.data() + (t * c.n_heads + h) * c.head_dim, slot, h / group),
                 slot, h / group);
        }
      }
      st.write(c.head_dim, oh);
    }
  }
  return out;
}

// How many blocks took each path of attention_prefill.cu.
struct Paths {
  int staged = 0, direct = 0;
};

// attention_prefill.cu's walk, block by block, with attention_tile_math.cuh.
std::vector<float> prefill(const Cache& c, int& flag, Paths& paths) {
  std::vector<float> out(c.q.size());
  const PrefillPlan plan = plan_prefill(c.n_heads, c.n_kv_heads, c.head_dim);
  const int64_t tiles = (c.n_tokens() + plan.tokens_per_block - 1) / plan.tokens_per_block;
  for (int64_t tile = 0; tile < tiles; ++tile) {
    for (int64_t y = 0; y < c.n_kv_heads * plan.head_chunks; ++y) {
      int32_t rows[kPrefillMaxWarps], poss[kPrefillMaxWarps];
      bool oks[kPrefillMaxWarps];
      int n_tok = 0;
      for (int i = 0; i < plan.tokens_per_block; ++i) {
        const int64_t t = tile * plan.tokens_per_block + i;
        if (t >= c.n_tokens()) break;
        rows[n_tok] = c.seq[static_cast<size_t>(t)];
        poss[n_tok] = c.pos[static_cast<size_t>(t)];
        oks[n_tok] = attention_token_ok(rows[n_tok], poss[n_tok], c.n_seq_rows(), c.block_size,
                                        c.max_blocks);
        ++n_tok;
      }
      TileRows tr{};
      collect_tile_rows(rows, poss, oks, n_tok, tr);
      std::vector<PrefillPair> pairs;
      std::vector<States> states;
      for (int w = 0; w < plan.warps; ++w) {
        pairs.push_back(prefill_pair(plan, tile, y, w, c.n_tokens(), c.n_heads, c.n_kv_heads));
        states.emplace_back(c.head_dim);
      }
      // The active warps with a good token, and their tokens' rows and positions.
      std::vector<int> warps;
      for (int w = 0; w < plan.warps; ++w) {
        const PrefillPair& pr = pairs[static_cast<size_t>(w)];
        if (pr.active && attention_token_ok(c.seq[static_cast<size_t>(pr.token)],
                                            c.pos[static_cast<size_t>(pr.token)], c.n_seq_rows(),
                                            c.block_size, c.max_blocks))
          warps.push_back(w);
      }
      auto query = [&](int w) {
        return c.q.data() + (pairs[static_cast<size_t>(w)].token * c.n_heads +
                             pairs[static_cast<size_t>(w)].head) *
                                c.head_dim;
      };
      auto position = [&](int w) {
        return c.pos[static_cast<size_t>(pairs[static_cast<size_t>(w)].token)];
      };
      if (tr.n == 1) {  // staged: tiles of kv_rows slots, each warp its positions of the tile
        ++paths.staged;
        const int32_t* blocks = c.table.data() + int64_t{tr.row[0]} * c.max_blocks;
        for (int64_t j0 = 0; j0 <= tr.max_pos[0]; j0 += plan.kv_rows) {
          std::vector<int64_t> slot(static_cast<size_t>(plan.kv_rows), -1);
          for (int jj = 0; jj < plan.kv_rows; ++jj)
            if (j0 + jj <= tr.max_pos[0])
              slot[static_cast<size_t>(jj)] =
                  attention_slot(blocks, c.block_size, c.n_slots, j0 + jj);
          for (const int w : warps) {
            const PrefillPair& pr = pairs[static_cast<size_t>(w)];
            for (int at = 0; at < tile_positions(j0, plan.kv_rows, position(w)); ++at) {
              const int64_t sl = slot[static_cast<size_t>(at)];
              if (sl < 0) {
                flag = 1;
                continue;
              }
              states[static_cast<size_t>(w)].add(
                  c, at % kPrefillResidues, score(c, query(w), sl, pr.kv_head), sl, pr.kv_head);
            }
          }
        }
      } else if (tr.n > 1) {  // several sequences: each warp alone, positions 0 .. p in order
        ++paths.direct;
        for (const int w : warps) {
          const PrefillPair& pr = pairs[static_cast<size_t>(w)];
          const int32_t* blocks =
              c.table.data() + int64_t{c.seq[static_cast<size_t>(pr.token)]} * c.max_blocks;
          for (int64_t j = 0; j <= position(w); ++j) {
            const int64_t sl = attention_slot(blocks, c.block_size, c.n_slots, j);
            if (sl < 0) {
              flag = 1;
              continue;
            }
            states[static_cast<size_t>(w)].add(c, static_cast<int>(j % kPrefillResidues),
                                               score(c, query(w), sl, pr.kv_head), sl, pr.kv_head);
          }
        }
      }
      for (int w = 0; w < plan.warps; ++w) {
        const PrefillPair& pr = pairs[static_cast<size_t>(w)];
        if (!pr.active) continue;
        float* oh = out.data() + (pr.token * c.n_heads + pr.head) * c.head_dim;
        if (!attention_token_ok(c.seq[static_cast<size_t>(pr.token)],
                                c.pos[static_cast<size_t>(pr.token)], c.n_seq_rows(), c.block_size,
                                c.max_blocks)) {
          flag = 1;
          std::fill(oh, oh + c.head_dim, NAN);
        } else {
          states[static_cast<size_t>(w)].write(c.head_dim, oh);
        }
      }
    }
  }
  return out;
}

// softmax(q K^T * scale) V in double for a good token of sequences 0..2 (every block valid).
std::vector<double> reference(const Cache& c, int64_t t, int64_t h) {
  const int64_t g = h / (c.n_heads / c.n_kv_heads);
  const int32_t row = c.seq[static_cast<size_t>(t)], p = c.pos[static_cast<size_t>(t)];
  std::vector<double> s(static_cast<size_t>(p) + 1), o(static_cast<size_t>(c.head_dim), 0.0);
  std::vector<int64_t> slots(s.size());
  for (int64_t j = 0; j <= p; ++j) {
    const int32_t b = c.table[static_cast<size_t>(row * c.max_blocks + j / c.block_size)];
    slots[static_cast<size_t>(j)] = int64_t{b} * c.block_size + j % c.block_size;
    double dot = 0;
    for (int64_t i = 0; i < c.head_dim; ++i)
      dot += double{c.q[static_cast<size_t>((t * c.n_heads + h) * c.head_dim + i)]} *
             double{c.k[static_cast<size_t>(
                 (slots[static_cast<size_t>(j)] * c.n_kv_heads + g) * c.head_dim + i)]};
    s[static_cast<size_t>(j)] = dot / std::sqrt(static_cast<double>(c.head_dim));
  }
  const double top = *std::max_element(s.begin(), s.end());
  double z = 0;
  for (double& x : s) z += (x = std::exp(x - top));
  for (size_t j = 0; j < s.size(); ++j)
    for (int64_t i = 0; i < c.head_dim; ++i)
      o[static_cast<size_t>(i)] +=
          s[j] / z *
          double{c.v[static_cast<size_t>((slots[j] * c.n_kv_heads + g) * c.head_dim + i)]};
  return o;
}

}  // namespace

TEST_CASE("prefill attention geometry: every (token, head) once, tiles fit", "[cpu][cuda]") {
  for (const int64_t n_kv : {1, 2, 8}) {
    for (const int64_t group : {1, 2, 3, 4, 5, 8, 16, 17, 32, 64}) {
      for (const int64_t head_dim : {1, 7, 64, 80, 100, 128, 255, 256}) {
        const int64_t n_heads = n_kv * group;
        CAPTURE(n_kv, group, head_dim);
        const PrefillPlan p = plan_prefill(n_heads, n_kv, head_dim);
        CHECK(p.warps == p.heads_per_block * p.tokens_per_block);
        CHECK((p.warps >= 1 && p.warps <= kPrefillMaxWarps));
        CHECK(int64_t{p.head_chunks} * p.heads_per_block >= group);
        CHECK(int64_t{p.head_chunks - 1} * p.heads_per_block < group);
        CHECK(p.kv_rows % kPrefillResidues == 0);
        CHECK((p.kv_rows >= kPrefillResidues && p.kv_rows <= kPrefillMaxKvRows));
        CHECK(p.kv_rows * head_dim <= kPrefillTileFloats);
        if (head_dim <= 64) CHECK(p.kv_rows == kPrefillMaxKvRows);  // small heads: long tiles
        for (const int64_t n_tokens : {1, 15, 16, 17, 141}) {
          std::vector<int> seen(static_cast<size_t>(n_tokens * n_heads), 0);
          const int64_t tiles = (n_tokens + p.tokens_per_block - 1) / p.tokens_per_block;
          for (int64_t tile = 0; tile < tiles; ++tile)
            for (int64_t y = 0; y < n_kv * p.head_chunks; ++y)
              for (int w = 0; w < p.warps; ++w) {
                const PrefillPair pr = prefill_pair(p, tile, y, w, n_tokens, n_heads, n_kv);
                if (!pr.active) continue;
                REQUIRE(
                    (pr.token >= 0 && pr.token < n_tokens && pr.head >= 0 && pr.head < n_heads));
                CHECK(pr.kv_head == pr.head / group);  // the paged kernel's GQA rule
                ++seen[static_cast<size_t>(pr.token * n_heads + pr.head)];
              }
          CHECK(std::count(seen.begin(), seen.end(), 1) == n_tokens * n_heads);
        }
      }
    }
  }
}

TEST_CASE("prefill attention: a tile's sequences, positions and bounds", "[cpu][cuda]") {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 500; ++trial) {
    const int n = 1 + static_cast<int>(rng() % kPrefillMaxWarps);
    int32_t rows[kPrefillMaxWarps], pos[kPrefillMaxWarps];
    bool ok[kPrefillMaxWarps];
    std::vector<int32_t> first;  // the direct computation
    std::map<int32_t, int32_t> top;
    for (int t = 0; t < n; ++t) {
      rows[t] = static_cast<int32_t>(rng() % 5) - 1;
      pos[t] = static_cast<int32_t>(rng() % 300);
      ok[t] = rng() % 4 != 0;
      if (!ok[t]) continue;
      if (top.count(rows[t]) == 0) first.push_back(rows[t]);
      top[rows[t]] = std::max(top.count(rows[t]) ? top[rows[t]] : -1, pos[t]);
    }
    TileRows tr{};
    collect_tile_rows(rows, pos, ok, n, tr);
    REQUIRE(tr.n == static_cast<int>(first.size()));
    for (int r = 0; r < tr.n; ++r) {
      CHECK(tr.row[r] == first[static_cast<size_t>(r)]);
      CHECK(tr.max_pos[r] == top[first[static_cast<size_t>(r)]]);
    }
  }
  // Tiles of 16 hand a query at position p exactly positions 0 .. p, each once.
  for (const int32_t p : {0, 3, 15, 16, 17, 63, 64, 200}) {
    int64_t seen = 0;
    for (int64_t j0 = 0; j0 <= 200; j0 += 16) seen += tile_positions(j0, 16, p);
    CHECK(seen == int64_t{p} + 1);
    CHECK(tile_positions(0, 16, p) == std::min(p + 1, 16));
  }
  CHECK(tile_positions(32, 16, 31) == 0);
  const int32_t blocks[3] = {2, -1, 9};  // block size 4, pool of 9 blocks (36 slots)
  CHECK(attention_slot(blocks, 4, 36, 1) == 9);
  CHECK(attention_slot(blocks, 4, 36, 5) == -1);  // negative block
  CHECK(attention_slot(blocks, 4, 36, 8) == -1);  // slot 36 past the pool
  CHECK(attention_token_ok(0, 11, 1, 4, 3));
  CHECK_FALSE(attention_token_ok(0, 12, 1, 4, 3));  // block 3 of 3
  CHECK_FALSE(attention_token_ok(1, 0, 1, 4, 3));
  CHECK_FALSE(attention_token_ok(-1, 0, 1, 4, 3));
  CHECK_FALSE(attention_token_ok(0, -1, 1, 4, 3));
}

TEST_CASE("prefill attention walk equals the paged kernel's bit for bit, and the definition",
          "[cpu][cuda]") {
  struct Shape {
    int64_t n_heads, n_kv_heads, head_dim;
  };
  for (const Shape sh : {Shape{4, 4, 64}, Shape{6, 2, 80}, Shape{8, 2, 256}, Shape{20, 1, 7}}) {
    for (const int64_t block_size : {16, 5, 1}) {
      CAPTURE(sh.n_heads, sh.n_kv_heads, sh.head_dim, block_size);
      const Cache c = make_cache(sh.n_heads, sh.n_kv_heads, sh.head_dim, block_size);
      int flag_paged = 0, flag_prefill = 0;
      Paths paths;
      const std::vector<float> want = paged(c, flag_paged);
      const std::vector<float> got = prefill(c, flag_prefill, paths);
      CHECK(flag_paged == 1);
      CHECK(flag_prefill == 1);
      // The batch exercises both paths (one-token tiles never mix sequences).
      CHECK(paths.staged > 0);
      if (plan_prefill(sh.n_heads, sh.n_kv_heads, sh.head_dim).tokens_per_block > 1)
        CHECK(paths.direct > 0);
      REQUIRE(got.size() == want.size());
      CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
      // The same tokens without the first one: other tiles, the same bits.
      Cache shifted = c;
      shifted.seq.erase(shifted.seq.begin());
      shifted.pos.erase(shifted.pos.begin());
      const int64_t head_len = c.n_heads * c.head_dim;
      shifted.q.erase(shifted.q.begin(), shifted.q.begin() + head_len);
      const std::vector<float> got2 = prefill(shifted, flag_prefill, paths);
      CHECK(std::memcmp(got2.data(), want.data() + head_len, got2.size() * sizeof(float)) == 0);
      for (int64_t t = 0; t < c.n_tokens(); ++t) {
        const int32_t row = c.seq[static_cast<size_t>(t)], p = c.pos[static_cast<size_t>(t)];
        const bool good = row >= 0 && row < 3 && p >= 0 && p / block_size < c.max_blocks;
        for (int64_t h = 0; h < c.n_heads; ++h) {
          const float* oh = got.data() + (t * c.n_heads + h) * c.head_dim;
          if (row == 3) {
            CHECK(std::isfinite(oh[0]));  // its good block's positions, the bad ones skipped
            continue;
          }
          if (!good) {
            CHECK(std::isnan(oh[0]));
            continue;
          }
          const std::vector<double> ref = reference(c, t, h);
          double worst = 0;
          for (int64_t i = 0; i < c.head_dim; ++i)
            worst = std::max(worst, std::fabs(double{oh[i]} - ref[static_cast<size_t>(i)]));
          // Convex combinations of V in [-1, 1]: f32 scores and online sums ~1e-7 apart.
          CHECK(worst <= 1e-5);
        }
      }
    }
  }
}

TEST_CASE("attention window: both kernels' walks read exactly the window, in the same states",
          "[cpu][cuda]") {
  // The paged kernel: warp w reads first_in_residue(first, w, 4), +4, ... <= pos. The prefill
  // kernel: tiles of kv_rows from the block's lowest start, in each tile the indices
  // tile_first_index .. tile_positions, state = index % 4. Both must read each position of
  // [pos - window + 1, pos] (clamped at 0) once, position j in state j % 4, and nothing else.
  for (const int32_t window : {0, 1, 2, 3, 4, 5, 7, 16, 61, 1000}) {
    for (const int32_t pos : {0, 1, 3, 4, 5, 63, 64, 65, 130, 999, 1000, 1001}) {
      for (const int32_t lowest_pos : {int32_t{0}, pos / 2, pos}) {
        CAPTURE(window, pos, lowest_pos);
        const int64_t first = attention_window_start(pos, window);
        CHECK(first == (window > 0 ? std::max<int64_t>(0, int64_t{pos} - window + 1) : 0));
        std::vector<int> paged(static_cast<size_t>(pos) + 1, 0), prefill(paged.size(), 0);
        for (int w = 0; w < kPrefillResidues; ++w)
          for (int64_t j = first_in_residue(first, w, kPrefillResidues); j <= pos;
               j += kPrefillResidues) {
            CHECK(j % kPrefillResidues == w);
            ++paged[static_cast<size_t>(j)];
          }
        const int kv_rows = 64;
        const int64_t lowest = attention_window_start(lowest_pos, window);
        for (int64_t j0 = lowest - lowest % kv_rows; j0 <= pos; j0 += kv_rows) {
          const int n_here = tile_positions(j0, kv_rows, pos);
          const int lo = tile_first_index(j0, first);
          for (int jj = lo - lo % kPrefillResidues; jj < n_here; jj += kPrefillResidues)
            for (int w = 0; w < kPrefillResidues; ++w) {
              const int at = jj + w;
              if (at < lo) continue;
              if (at >= n_here) break;
              CHECK((j0 + at) % kPrefillResidues == w);
              ++prefill[static_cast<size_t>(j0 + at)];
            }
        }
        for (int64_t j = 0; j <= pos; ++j) {
          const int want = j >= first ? 1 : 0;
          CHECK(paged[static_cast<size_t>(j)] == want);
          CHECK(prefill[static_cast<size_t>(j)] == want);
        }
      }
    }
  }
}
