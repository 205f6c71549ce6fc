// rope-probe's built-in texts and the driver that runs the four probes (rope_probe.h).
// The texts are short children's-story English (what small Llama test models such as
// stories260K were trained on); any model reads them, and --prompt, --text etc. replace them.
#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "diag/rope_probe.h"

namespace llmctl {

const char* const kRopeProbePrompt =
    "Once upon a time, there was a little girl named Lily. She loved to play in the park with "
    "her red ball. One day, she saw a big dog near the tree. The dog wanted to play too, so "
    "Lily threw the ball and the dog ran after it.";

const char* const kRopeProbeReference =
    "Once upon a time, there was a little boy named Tim. Tim had a big red truck. He liked to "
    "play with his truck every day. One day, Tim went to the park with his mom. At the park, he "
    "saw a girl named Sue. Sue was sad because she lost her doll. Tim wanted to help her. He "
    "looked under the tree and behind the slide. Then he saw the doll in the sand. Tim picked "
    "up the doll and gave it to Sue. Sue was very happy. She said, \"Thank you, Tim!\" Tim "
    "smiled and said, \"You are welcome.\" They played together all day. When the sun went "
    "down, Tim and his mom went home. Tim was tired but happy. He had a new friend. The next "
    "day, Tim and Sue met at the park again. They played with the truck and the doll. They "
    "were best friends. The end.";

const char* const kRopeProbeFact = "Once upon a time, there was a little girl named Sue.";
const char* const kRopeProbeFiller = "She liked to play in the park with her friends.";
const char* const kRopeProbeCue = "One day,";
const char* const kRopeProbeExpected = " Sue";

RopeProbeSet parse_rope_probe_set(const std::string& list) {
  RopeProbeSet set{false, false, false, false};
  size_t start = 0;
  bool any = false;
  while (start <= list.size()) {
    const size_t end = std::min(list.find(',', start), list.size());
    const std::string word = list.substr(start, end - start);
    if (word == "shift")
      set.shift = true;
    else if (word == "ablation")
      set.ablation = true;
    else if (word == "distance")
      set.distance = true;
    else if (word == "sweep")
      set.sweep = true;
    else
      throw Error(fmt::format("rope-probe: '{}' is not a probe", word),
                  "name some of shift, ablation, distance, sweep, comma-separated");
    any = true;
    start = end + 1;
  }
  if (!any) throw Error("rope-probe: no probe named");
  return set;
}

RopeProbeReport run_rope_probe(const std::string& model_path, const ModelConfig& c,
                               const ModelWeights& w, Backend& b, const Tokenizer& tok,
                               const RopeProbeOptions& opt) {
  RopeProbeReport r;
  r.model = model_path;
  r.backend = b.name();
  r.config = c;
  r.probes = opt.probes;
  const bool bos = tok.bos_id() >= 0 && tok.add_bos_default();
  const std::vector<int32_t> prompt = tok.encode(opt.prompt, bos);
  r.prompt_tokens = static_cast<int64_t>(prompt.size());
  const std::vector<int64_t> offsets = opt.offsets.empty() ? default_shift_offsets(c) : opt.offsets;
  if (opt.probes.shift) {
    r.shift = probe_shift(c, w, b, prompt, offsets);
    std::vector<int64_t> last_pos;
    for (const int64_t o : offsets) last_pos.push_back(o + r.prompt_tokens - 1);
    r.angles = angle_precision(c, last_pos);
  }
  if (opt.probes.ablation) r.ablation = probe_ablation(c, w, b, prompt, opt.seed);
  if (opt.probes.distance) r.distance = probe_distance(c, w, b, tok, opt);
  if (opt.probes.sweep) {
    // The reference text, cut to the training context (the sweep asks which RoPE the weights
    // were trained with, inside the positions they were trained on).
    std::vector<int32_t> ref = tok.encode(opt.reference, bos);
    if (c.n_ctx_train > 1 && static_cast<int64_t>(ref.size()) > c.n_ctx_train)
      ref.resize(static_cast<size_t>(c.n_ctx_train));
    r.sweep = probe_sweep(c, w, b, ref);
  }
  return r;
}

}  // namespace llmctl
