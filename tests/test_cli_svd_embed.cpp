// `llmctl svd-embed` on stories260K against tools/gen_svd_embed_fixture.py (gguf-py + numpy
// float64 SVD and norm statistics), its output formats, and its errors.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <nlohmann/json.hpp>

#include "support/fixtures.h"
#include "support/run_cli.h"
#include "support/test_data.h"

using llmctl::test::require_test_file;
using llmctl::test::run_llmctl;
using nlohmann::json;

namespace {

json golden(const std::string& key) {
  return json::parse(
      llmctl::test::read_file(llmctl::test::fixture_path("svd_embed_stories260K.json")))[key];
}

}  // namespace

TEST_CASE("svd-embed --json matches numpy's float64 SVD and norm statistics", "[cli][golden]") {
  const std::string model = require_test_file("models/stories260K.gguf");
  for (const std::string tensor : {"token_embd", "output"}) {
    for (const std::string gram : {"auto", "f64"}) {
      auto r = run_llmctl({"svd-embed", "-m", model, "--tensor", tensor, "--gram", gram, "--json"});
      INFO(tensor << " " << gram << "\n" << r.err);
      REQUIRE(r.code == 0);
      const json j = json::parse(r.out);
      const json g = golden(tensor);
      CHECK(j["tensor"] == tensor + ".weight");
      CHECK(j["n_vocab"] == 512);
      CHECK(j["n_embd"] == 64);
      CHECK(j["device"] == "cpu");
      const json& s = j["spectrum"];
      REQUIRE(s["sigma"].size() == g["sigma"].size());
      const double smax = g["sigma"][0].get<double>();
      double worst = 0;
      for (size_t i = 0; i < g["sigma"].size(); ++i)
        worst =
            std::max(worst, std::fabs(s["sigma"][i].get<double>() - g["sigma"][i].get<double>()));
      CHECK(worst <= 1e-6 * smax);
      CHECK(s["error_bound"].get<double>() <= 1e-6);
      // auto keeps the float32 Gram only when its measured error allows; f64 never tries it.
      const bool fell_back = s["fell_back_to_f64"].get<bool>();
      CHECK(s["gram_precision"] == (gram == "f64" || fell_back ? "f64" : "f32"));
      if (gram == "f64") CHECK_FALSE(fell_back);
      CHECK(s["rank_90"] == g["rank_90"]);
      CHECK(s["rank_99"] == g["rank_99"]);
      CHECK(s["rank_999"] == g["rank_999"]);
      CHECK(s["effective_rank"].get<double>() ==
            Approx(g["effective_rank"].get<double>()).epsilon(1e-6));
      CHECK(s["stable_rank"].get<double>() == Approx(g["stable_rank"].get<double>()).epsilon(1e-6));
      CHECK(s["condition_number"].get<double>() ==
            Approx(g["condition_number"].get<double>()).epsilon(1e-5));
      CHECK(s["cumulative_energy"].back().get<double>() == Approx(1.0));
      const json& n = j["norms"];
      REQUIRE(n["values"].size() == 512);
      for (size_t t = 0; t < 512; t += 37)
        CHECK(n["values"][t].get<double>() == Approx(g["norms"][t].get<double>()).epsilon(1e-9));
      CHECK(n["mean"].get<double>() == Approx(g["norm_mean"].get<double>()).epsilon(1e-9));
      CHECK(n["sd"].get<double>() == Approx(g["norm_sd"].get<double>()).epsilon(1e-9));
      for (size_t d = 0; d < 11; ++d)
        CHECK(n["deciles"][d].get<double>() ==
              Approx(g["norm_deciles"][d].get<double>()).epsilon(1e-9));
      CHECK(n["pearson"].get<double>() == Approx(g["pearson"].get<double>()).epsilon(1e-9));
      CHECK(n["spearman"].get<double>() == Approx(g["spearman"].get<double>()).epsilon(1e-9));
      CHECK(n["slope_per_1000_ids"].get<double>() ==
            Approx(g["slope_per_1000_ids"].get<double>()).epsilon(1e-6));
      const double rho = g["spearman"].get<double>();
      CHECK(n["trend"] == (rho >= 0.1 ? "grows" : rho <= -0.1 ? "shrinks" : "flat"));
      const json& lr = j["low_rank"];
      REQUIRE(lr.contains("rank"));
      CHECK(lr["rank"] == g["rank_90"]);
      CHECK(lr["rows_measured"] == 512);
      CHECK(lr["reconstruction_error"].get<double>() < lr["direct_error"].get<double>());
    }
  }
}

TEST_CASE("svd-embed text, csv and svg outputs", "[cli]") {
  const std::string model = require_test_file("models/stories260K.gguf");
  auto r = run_llmctl({"svd-embed", "-m", model, "--top", "5"});
  REQUIRE(r.code == 0);
  for (const char* s : {"Spectrum: 64 singular values", "energy ranks: 90% at", "condition number",
                        "effective rank", "Token norms", "Spearman rho", "verdict",
                        "Low-rank storage: rank", "bits/weight", "Time:", "... 59 more"})
    CHECK(r.out.find(s) != std::string::npos);

  r = run_llmctl({"svd-embed", "-m", model, "--csv"});
  REQUIRE(r.code == 0);
  CHECK(r.out.find("i,sigma,energy,cumulative_energy\n1,") == 0);
  CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 65);

  const std::string base = llmctl::test::temp_dir() + "/chart.svg";
  r = run_llmctl({"svd-embed", "-m", model, "--no-low-rank", "--svg", base});
  REQUIRE(r.code == 0);
  CHECK(r.out.find("Low-rank storage: skipped (not requested)") != std::string::npos);
  for (const char* suffix : {"-spectrum.svg", "-energy.svg", "-norms.svg"}) {
    const std::string svg = llmctl::test::read_file(llmctl::test::temp_dir() + "/chart" + suffix);
    CHECK(svg.find("<svg") != std::string::npos);
    CHECK(svg.find("</svg>") != std::string::npos);
  }
  CHECK(llmctl::test::read_file(llmctl::test::temp_dir() + "/chart-norms.svg").find("<circle") !=
        std::string::npos);
}

TEST_CASE("svd-embed errors and exit codes", "[cli]") {
  const std::string model = require_test_file("models/stories260K.gguf");
  auto r = run_llmctl({"svd-embed", "-m", model, "--tensor", "blk.0.attn_q"});
  CHECK(r.code == 2);
  r = run_llmctl({"svd-embed", "-m", model, "--top", "0"});
  CHECK(r.code == 2);
  r = run_llmctl({"svd-embed", "-m"});  // without -m: the default model, as run's
  CHECK(r.code == 2);
  r = run_llmctl({"svd-embed", "-m", model, "--json", "--csv"});
  CHECK(r.code == 2);
  r = run_llmctl({"svd-embed", "-m", model, "--residual-type", "q9_9"});
  CHECK(r.code == 2);
  r = run_llmctl({"svd-embed", "-m", model, "--rank", "65"});
  CHECK(r.code == 1);
  CHECK(r.err.find("--rank 65") != std::string::npos);
  const std::string vocab = require_test_file("vocab/ggml-vocab-llama-spm.gguf");
  r = run_llmctl({"svd-embed", "-m", vocab});
  CHECK(r.code == 1);
  CHECK(r.err.find("no tensor 'token_embd.weight'") != std::string::npos);
  r = run_llmctl({"svd-embed", "-m", "/nonexistent.gguf"});
  CHECK(r.code == 1);
}

TEST_CASE("svd-embed --device: cpu, auto and cuda say where they computed", "[cli]") {
  const std::string model = require_test_file("models/stories260K.gguf");
  const auto version = run_llmctl({"--version"});
  REQUIRE(version.code == 0);
  const bool cuda_built = version.out.find("cuda: compiled in") != std::string::npos;
  const bool gpu_visible = version.out.find("\ngpu 0:") != std::string::npos;
  auto r = run_llmctl({"svd-embed", "-m", model, "--device", "cpu", "--json", "--no-low-rank"});
  REQUIRE(r.code == 0);
  CHECK(json::parse(r.out)["device"] == "cpu");
  r = run_llmctl({"svd-embed", "-m", model, "--device", "auto", "--json", "--no-low-rank"});
  REQUIRE(r.code == 0);
  CHECK(json::parse(r.out)["device"] == (gpu_visible ? "cuda:0" : "cpu"));
  for (const std::string device : {"cuda", "cuda:0"}) {
    r = run_llmctl({"svd-embed", "-m", model, "--device", device, "--json", "--no-low-rank"});
    INFO(device << " cuda_built " << cuda_built << " gpu " << gpu_visible << "\n" << r.err);
    if (gpu_visible) {  // the GPU path itself is checked against dgesdd in tests/gpu
      REQUIRE(r.code == 0);
      CHECK(json::parse(r.out)["device"] == "cuda:0");
    } else if (cuda_built) {
      CHECK(r.code == 1);
      CHECK(r.err.find("no GPU available") != std::string::npos);
    } else {  // the backend selection's message, as in every subcommand
      CHECK(r.code == 1);
      CHECK(r.err.find("device '" + device + "': no GPU available") != std::string::npos);
      CHECK(r.err.find("-DLLMCTL_CUDA=ON") != std::string::npos);
    }
  }
  // Never a GPU index past the visible ones, nor a device name that is not cuda[:N].
  r = run_llmctl({"svd-embed", "-m", model, "--device", "cuda:7", "--no-low-rank"});
  CHECK(r.code == 1);
  CHECK(r.err.find("cuda:7") != std::string::npos);
  r = run_llmctl({"svd-embed", "-m", model, "--device", "tpu"});
  CHECK(r.code == 2);  // a usage error, as in every subcommand
  CHECK(r.err.find("'tpu'") != std::string::npos);
}
