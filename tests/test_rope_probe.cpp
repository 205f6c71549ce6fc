// diag/rope_probe: the metrics against closed forms, the analytic angle table against float
// rounding bounds, and the four probes on stories260K (a real Llama; skipped without it).
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "backend/selection.h"
#include "core/error.h"
#include "diag/rope_probe.h"
#include "diag/rope_probe_check.h"
#include "diag/rope_probe_runner.h"
#include "model/model_loader.h"
#include "support/test_data.h"

using namespace llmctl;

namespace {

struct Fixture {
  LoadedModel m = load_model(test::require_test_file("models/stories260K.gguf"));
  Tokenizer tok = Tokenizer::from_gguf(*m.gguf);
  std::unique_ptr<Backend> backend = make_backend(BackendChoice{"cpu", 1, false});
  std::vector<int32_t> prompt = tok.encode(kRopeProbePrompt, true);
};

}  // namespace

TEST_CASE("rope-probe metrics: KL and log-probabilities match closed forms", "[cpu]") {
  // P = softmax(0, ln 3) = (1/4, 3/4), Q = (1/2, 1/2).
  const float p[2] = {0.0f, static_cast<float>(std::log(3.0))};
  const float q[2] = {5.0f, 5.0f};
  const double expected = 0.25 * std::log(0.5) + 0.75 * std::log(1.5);
  CHECK(kl_nats(p, q, 2) == Approx(expected).epsilon(1e-6));
  CHECK(kl_nats(p, p, 2) == 0.0);
  CHECK(log_prob(p, 2, 1) == Approx(std::log(0.75)).epsilon(1e-6));
  CHECK(rank_of(p, 2, 0) == 1);
  CHECK(rank_of(p, 2, 1) == 0);
  CHECK(max_abs_diff(p, q, 2) == Approx(5.0));
}

TEST_CASE("rope-probe angle table: float32 angles drift, float64 ones do not", "[cpu]") {
  ModelConfig c;
  c.n_rot = 8;
  c.rope_freq_base = 10000;
  const std::vector<AngleRow> rows = angle_precision(c, {1000});
  REQUIRE(rows.size() >= 12);
  for (const AngleRow& a : rows) {
    // Rounding cos/sin of an exact angle to float: at most half an ulp of 1 (2^-24).
    CHECK(a.f64_rot_err <= std::ldexp(1.0, -24));
    // A float angle of size ~p is off by at most a few ulps of p (~p * 2^-23 per product).
    CHECK(a.f32_angle_err <= 8.0 * static_cast<double>(a.pos) * std::ldexp(1.0, -23));
  }
  CHECK(rows.front().pos == 256);
  CHECK(rows.front().f32_rot_err < 1e-4);
  // At 2^30, p * 0.1 ~ 1e8 rad, where one float ulp is 8 rad: the phase is lost.
  CHECK(rows.back().pos == (int64_t{1} << 30));
  CHECK(rows.back().f32_rot_err > 0.1);
}

TEST_CASE("rope-probe default offsets cover 1k, 8k, 32k and past the training context", "[cpu]") {
  ModelConfig c;
  c.n_ctx_train = 2048;
  CHECK(default_shift_offsets(c) == std::vector<int64_t>{1024, 2048, 8192, 32768});
  c.n_ctx_train = 4096;
  CHECK(default_shift_offsets(c) == std::vector<int64_t>{1024, 4096, 8192, 16384, 32768});
}

TEST_CASE("rope-probe shift and ablation on stories260K", "[cpu]") {
  Fixture f;
  const ModelConfig& c = f.m.config;
  const std::vector<ShiftRow> rows =
      probe_shift(c, f.m.weights, *f.backend, f.prompt, {1024, 32768, 1000000});
  REQUIRE(rows.size() == 4);
  CHECK(rows[0].offset == 0);  // a second identical run: exactly the same logits
  CHECK(rows[0].kl_max == 0.0);
  CHECK(rows[0].max_dlogit == 0.0);
  const RopeThresholds t;
  for (const ShiftRow& r : rows) {
    INFO("offset " << r.offset);
    CHECK(r.kl_max <= t.max_shift_kl);
    CHECK(r.max_dlogit <= t.max_shift_dlogit);
  }
  CHECK_THROWS_AS(
      probe_shift(c, f.m.weights, *f.backend, f.prompt, {std::numeric_limits<int32_t>::max()}),
      llmctl::Error);
  const AblationResult a = probe_ablation(c, f.m.weights, *f.backend, f.prompt, 1);
  CHECK(a.kl_zero_mean > t.min_ablation_kl);
  CHECK(a.kl_shuffled_last > 0.0);
}

TEST_CASE("rope-probe distance curve on stories260K", "[cpu]") {
  Fixture f;
  RopeProbeOptions opt;
  opt.distance_ctx = 200;
  opt.theta = 1e6;
  const DistanceResult d = probe_distance(f.m.config, f.m.weights, *f.backend, f.tok, opt);
  CHECK(f.tok.decode({d.expected_id}).find("S") != std::string::npos);
  REQUIRE(d.curves.size() == 2);
  CHECK(d.curves[1].label == "theta 1e+06");
  const std::vector<DistancePoint>& pts = d.curves[0].points;
  REQUIRE(pts.size() >= 3);
  CHECK(pts[0].n_filler == 0);
  CHECK(pts[0].kl_vs_0 == 0.0);
  CHECK(pts[1].n_filler == 1);
  CHECK(pts.back().n_tokens == 200);
  for (const DistancePoint& p : pts) {
    CHECK(p.p_expected > 0.0);
    CHECK(p.p_expected <= 1.0);
  }
  opt.expected = "";  // adds no token after the cue
  CHECK_THROWS_AS(probe_distance(f.m.config, f.m.weights, *f.backend, f.tok, opt), llmctl::Error);
}

TEST_CASE("rope-probe sweep: the configured RoPE fits best and a wrong base is named", "[cpu]") {
  Fixture f;
  const std::vector<int32_t> ref = f.tok.encode(kRopeProbeReference, true);
  RopeProbeReport r;
  r.sweep = probe_sweep(f.m.config, f.m.weights, *f.backend, ref);
  REQUIRE(r.sweep.rows.size() == 5);
  CHECK(r.sweep.rows[0].configured);
  for (size_t i = 1; i < r.sweep.rows.size(); ++i) CHECK(r.sweep.rows[0].nll < r.sweep.rows[i].nll);
  r.ablation.kl_zero_mean = 1.0;
  CHECK(check_rope_probe(r, RopeThresholds{}).empty());

  // Metadata claiming base 1e5 for weights trained with 1e4: "base /10" fits better.
  ModelConfig wrong = f.m.config;
  wrong.rope_freq_base = 1e5;
  r.sweep = probe_sweep(wrong, f.m.weights, *f.backend, ref);
  const std::vector<std::string> fails = check_rope_probe(r, RopeThresholds{});
  REQUIRE(fails.size() == 1);
  CHECK(fails[0].rfind("sweep: 'base /10'", 0) == 0);
}

TEST_CASE("rope-probe baseline comparison names drifted and missing numbers", "[cpu]") {
  const nlohmann::json base = {{"shift", {{{"offset", 0}, {"kl_max", 0.0}}}},
                               {"sweep", {{"rows", {{{"name", "configured"}, {"nll", 2.0}}}}}},
                               {"thresholds", {{"max_shift_kl", 1e-6}}}};
  nlohmann::json cur = base;
  const DriftTolerance tol;
  CHECK(compare_rope_baseline(cur, base, tol).empty());
  cur["sweep"]["rows"][0]["nll"] = 2.0 * (1 + tol.rel / 2);  // inside the tolerance
  cur["thresholds"]["max_shift_kl"] = 1.0;                   // settings are not compared
  CHECK(compare_rope_baseline(cur, base, tol).empty());
  cur["sweep"]["rows"][0]["nll"] = 2.5;
  std::vector<std::string> d = compare_rope_baseline(cur, base, tol);
  REQUIRE(d.size() == 1);
  CHECK(d[0].find("sweep.rows[0].nll") != std::string::npos);
  cur["shift"] = nlohmann::json::array();
  d = compare_rope_baseline(cur, base, tol);
  CHECK(d.size() == 3);  // shift[0].offset, shift[0].kl_max missing; nll drifted
}
