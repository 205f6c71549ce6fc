// llmctl run: generation (one prompt, a JSONL batch, or interactive chat) with timings.
//
// Output contract (scripts rely on it):
//   stdout  the generated text only (with --echo, the prompt first), flushed after every
//           token, no newline added unless stdout is a terminal; with --json, one JSON object
//           instead: {prompt_ids, generated_ids, text, finish_reason, n_ctx, timings{...}};
//           with --batch, one JSON record per input line (batch_io.h).
//   stderr  one memory line at load, notes, a human timing line, and last of all ONE summary
//           line of space-separated key=value pairs:
//     llmctl-run: load_ms=F prompt_tokens=N gen_tokens=N ttft_ms=F prefill_tok_s=F
//                 decode_tok_s=F p50_ms=F p95_ms=F finish=eos|length|n_predict|stop|loop seed=N
//                 logits_hash=<16 hex digits, fnv1a-64 of the last logits' float32 bytes>
//     p50/p95: nearest-rank percentiles of the per-token decode latency (forward step + pick).
//     --batch ends with its own line (llmctl-batch: ...), see run_batch.cpp.
//   --attn-stats, --moe-stats and --acf print their tables on stderr after the generation,
//   before the timing and summary lines (with --json: "attn_stats", "moe_stats" and "acf"
//   objects in stdout's JSON).
//   With --batch each record carries its request's own objects; with -i each turn gets a
//   line or two on stderr (run_chat.cpp).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <optional>

#include "cli/app.h"
#include "cli/cli_style.h"
#include "cli/engine_options.h"
#include "cli/model_tokenizer.h"
#include "cli/run_session.h"

namespace llmctl::cli {

namespace {

// --seed: -1, or 0 .. 2^64-1.
CLI::Validator seed_value() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        if (v == "-1" || (!v.empty() && v.find_first_not_of("0123456789") == std::string::npos &&
                          (v.size() < 20 || (v.size() == 20 && v <= "18446744073709551615"))))
          return {};
        return fmt::format("wants an integer from 0 to 2^64-1, or -1 for a random seed, got '{}'",
                           v);
      },
      "");
}

}  // namespace

void add_run_command(CLI::App& app, Action& action) {
  static RunOptions opt;
  static double attn_alert_value = 0.0;  // --attn-alert T (opt.attn_alert when given)
  CLI::App* sub = app.add_subcommand(
      "run",
      "Generate text from a prompt (sampling or greedy, streaming), a JSONL batch, or a chat");
  sub->footer(
      "Examples:\n"
      "  llmctl run -m stories260K.gguf -p \"Once upon a time\" -n 48 --temp 0\n"
      "  echo \"Once upon a time\" | llmctl run -m stories260K.gguf --json | jq .generated_ids\n"
      "  llmctl run -m stories260K.gguf -p \"Once upon a time\" -n 0 --logits-out logits.f32\n"
      "  llmctl run -m model.gguf --batch prompts.jsonl --parallel 8 > answers.jsonl\n"
      "  llmctl run -m model.gguf --batch prompts.jsonl --shard 1/4 --seed 1 > out.1.jsonl\n"
      "  llmctl run --batch prompts.jsonl --merge out.*.jsonl > answers.jsonl\n"
      "  llmctl run -m SmolLM2-135M-Instruct.Q4_1.gguf -i           # the model's own chat "
      "template\n"
      "  llmctl run -m model.gguf -i --chat-template chatml --system \"Be brief.\"\n"
      "\nWithout -p or -f, the prompt is read from standard input when it is not a terminal.\n"
      "stdout carries only the generated text (--json: one JSON object). stderr ends with one\n"
      "summary line of key=value pairs:\n"
      "  llmctl-run: load_ms= prompt_tokens= gen_tokens= ttft_ms= prefill_tok_s= decode_tok_s=\n"
      "              p50_ms= p95_ms= finish=eos|length|n_predict|stop|loop seed= "
      "logits_hash=<fnv1a-64 hex>\n"
      "p50/p95 are per-token decode latencies; logits_hash covers the last logits computed.\n"
      "The prompt plus the generated tokens fit in -c positions; a full context stops with\n"
      "finish=length. Sampling order: penalties, top-k, temperature + softmax, top-p, min-p,\n"
      "draw (--temp 0: greedy argmax). The same --seed gives the same output on the same machine\n"
      "for any -t (every kernel is thread- and batch-invariant); without --seed a random one is\n"
      "used and printed (seed= in the summary, \"seed\" in --json). --stop ends generation before\n"
      "the stop string, which is never printed.\n"
      "KV cache: paged, blocks of --block-size positions; --batch sequences whose prompts share\n"
      "a prefix share its blocks.\n"
      "Diagnostics (tables on stderr before the summary line, with --json as \"attn_stats\",\n"
      "\"moe_stats\" and \"acf\" objects instead; with --batch every record has its own\n"
      "request's objects, and with -i every turn gets one line each on stderr):\n"
      "  --attn-stats  per layer (and per head in --json) over every query token, prompt and\n"
      "    generated: max/min/mean/std of the scaled scores q.k/sqrt(head_dim) the softmax\n"
      "    receives (after a soft-cap; raw_max: before it, on soft-capped models), taken inside\n"
      "    the attention kernel; how many were NaN/Inf; the mean entropy\n"
      "    of the softmax in nats next to 'uniform' = mean ln(positions), its largest possible\n"
      "    value (near it: the head attends everywhere; near 0: to one position); resid_absmax,\n"
      "    the largest |x| of the residual stream after the layer ('emb': the embeddings), so a\n"
      "    NaN can be traced to the layer that produced it. One 'attn-alert' line names the\n"
      "    first layer, head and position whose scores (before or after a soft-cap) or residual\n"
      "    hold NaN/Inf: where every overflow of the engine's arithmetic shows up (f32 scores,\n"
      "    an f16 KV cache storing |K|, |V| > 65504 as Inf; the softmax subtracts the max, so\n"
      "    large finite scores cannot overflow). --attn-alert T adds an alert for a max score\n"
      "    above T (none by default: 15-20 is normal in real models). An 'info:' line counts\n"
      "    the rows whose max exceeds ln(65504) = 11.09, where a softmax exponentiating in\n"
      "    fp16 before subtracting the max would overflow (information, not an alert).\n"
      "    Alerts are reports: the exit code stays 0.\n"
      "  --moe-stats  mixture-of-experts models only (an error on a dense model): per layer\n"
      "    with experts, over every token routed, prompt and generated: the tokens each expert\n"
      "    got (a token counts once for each of its k experts), the mean entropy in nats of the\n"
      "    router's softmax over all experts (ln E: it cannot tell them apart; 0: sure of one),\n"
      "    the top-k mass (the chosen experts' share of that softmax, before renormalisation),\n"
      "    max_load (the busiest expert's tokens over an even share) and the experts never\n"
      "    chosen (docs/diagnostics.md).\n"
      "  --acf  autocorrelation of the generated tokens: Cohen's kappa of id[t] == id[t-lag]\n"
      "    (0: chance agreement, 1: every token equals the one lag before) and the Pearson ACF\n"
      "    of the top-1 probability (of the raw logits) per step, for lags 1..n/2; the\n"
      "    dominant period is the lag whose local peak is highest (or its smallest divisor\n"
      "    that peaks within 0.05 of it) and its strength that value. 'loop: detected' when at\n"
      "    some point >= 95% of the last max(2P, 16) tokens equaled the token P before them\n"
      "    for some period P, i.e. the pattern was repeated twice in full; the report says\n"
      "    where, and whether the output still loops at its end.\n"
      "  --stop-on-loop  runs that loop test after every token and stops with finish=loop:\n"
      "    with --batch only the looping request (finish_reason \"loop\"), the others go on;\n"
      "    with -i only the answer (a note on stderr), the chat goes on.\n"
      "  With --batch the alert, the router statistics and the loop are measured per request,\n"
      "  exactly as if it ran alone (--attn-stats and --moe-stats turn the prefix cache off, so\n"
      "  every prompt token is measured);\n"
      "  with -i over the tokens a turn computes (the new part of the conversation and the\n"
      "  answer: earlier turns come from the cache). The alert is the lowest layer showing the\n"
      "  problem, at its earliest position, however the tokens were batched.\n"
      "Exit codes: 0 ok, 1 bad input file or error (--batch: a request failed, or a record\n"
      "could not be written), 2 usage error, 130 stopped by Ctrl-C.");
  add_engine_options(sub, opt, {kModel});
  sub->add_option("-p,--prompt", opt.prompt, "Prompt text");
  sub->add_option("-f,--file", opt.file, "Read the prompt verbatim from FILE; - is stdin")
      ->type_name("FILE");
  sub->add_option("-n,--n-predict", opt.n_predict,
                  "Tokens to generate at most (-1: until EOS or a full context)")
      ->capture_default_str()
      ->check(at_least(int64_t{-1}));
  SamplerParams& s = opt.sampling;
  sub->add_option("--temp", s.temperature, "Temperature; 0 = greedy")->capture_default_str();
  sub->add_option("--top-k", s.top_k, "Keep the k most likely tokens (0 = off)")
      ->capture_default_str();
  sub->add_option("--top-p", s.top_p, "Nucleus: smallest set with probability >= p (1 = off)")
      ->capture_default_str();
  sub->add_option("--min-p", s.min_p, "Drop tokens below min-p x the top probability (0 = off)")
      ->capture_default_str();
  sub->add_option("--repeat-penalty", s.repeat_penalty, "Repetition penalty (1 = off)")
      ->capture_default_str();
  sub->add_option("--repeat-last-n", s.repeat_last_n,
                  "Tokens the penalties look back on (-1 = all)")
      ->capture_default_str();
  sub->add_option("--presence-penalty", s.presence_penalty, "Presence penalty (0 = off)")
      ->capture_default_str();
  sub->add_option("--frequency-penalty", s.frequency_penalty, "Frequency penalty (0 = off)")
      ->capture_default_str();
  sub->add_option_function<std::string>(
         "-s,--seed",
         [](const std::string& v) {
           opt.seed = v == "-1" ? std::nullopt : std::optional<uint64_t>(std::stoull(v));
         },
         "Random seed; -1 (the default): a random one, printed in the summary")
      ->type_name("N")
      ->check(seed_value());
  sub->add_option("--stop", opt.stops, "Stop before this string (repeatable)")
      ->allow_extra_args(false);
  sub->add_flag("--ignore-eos", opt.ignore_eos,
                "Keep generating past the end-of-sequence token (and, with -i or --batch "
                "\"messages\", the chat template's end of turn): to -n tokens");
  sub->add_flag("--verify", opt.verify,
                "Scan every weight (values and quantization scales) for NaN/Inf before running; "
                "a bad one is an error naming the tensor (exit 1)");
  sub->add_flag("--echo", opt.echo, "Print the prompt before the generated text");
  sub->add_flag("--no-bos", opt.no_bos, "Do not prepend BOS (default: as the vocabulary says)");
  sub->add_option("--pre-tokenizer", opt.pre_tokenizer, kPreTokenizerHelp)
      ->type_name("NAME");
  sub->add_flag("--no-parse-special", opt.no_parse_special,
                "Treat special-token text in -p/-f/--batch prompts as plain text (default: "
                "\"<|im_start|>\" becomes its token, as llama.cpp does; chat turns are never "
                "parsed)");
  sub->add_flag("--json", opt.json,
                "Print one JSON object (ids, text, finish_reason, timings) instead of text");
  sub->add_option(
      "--logits-out", opt.logits_out,
      "Write the prompt's logits to FILE: raw little-endian float32, one row of n_vocab "
      "values per prompt position (BOS included), in prompt order")
      ->type_name("FILE");
  add_engine_options(sub, opt,
                     {kThreads | kDevice | kCtxSize | kKvType | kBatchInvariant | kCudaGraphs |
                      kBatchSize | kCpuReference});
  sub->add_option("--block-size", opt.block_size, "KV cache block size in positions")
      ->capture_default_str()
      ->check(in_range(int64_t{1}, int64_t{4096}))
      ->group(kEngineGroup);
  // Modes
  sub->add_option("--batch", opt.batch_file,
                  "Generate for every JSONL request line of FILE (- is stdin), decoded together; "
                  "one JSON record per line on stdout")
      ->type_name("FILE");
  sub->add_option("--parallel", opt.parallel,
                  "Sequences decoded together with --batch, up to 4096 (llama.cpp's -np)")
      ->capture_default_str()
      ->check(in_range(int64_t{1}, int64_t{4096}));
  sub->add_option("--resume", opt.resume,
                  "With --batch: skip the lines this earlier output FILE already answers")
      ->type_name("FILE");
  sub->add_option("--shard", opt.shard,
                  "With --batch: answer only the lines whose index is K mod N (K/N, 0 <= K < N), "
                  "one of N processes (docs/batch.md)")
      ->option_text("K/N");
  sub->add_option("--merge", opt.merge,
                  "Write the records of these --shard outputs as one run's, sorted by index "
                  "(with --batch IN: check every line of IN has one); loads no model")
      ->option_text("OUTPUT ...");
  sub->add_flag("-i,--interactive", opt.interactive,
                "Chat: read user turns from stdin, answer with the model's chat template");
  sub->add_option("--chat-template", opt.chat_template,
                  "A built-in template for -i and --batch \"messages\": llama2, llama3, chatml or "
                  "zephyr (default: the model's own Jinja template)")
      ->type_name("NAME");
  sub->add_option("--chat-template-file", opt.chat_template_file,
                  "A Jinja chat template file instead of the model's (Hugging Face semantics)")
      ->type_name("FILE");
  sub->add_option("--system,--system-prompt", opt.system,
                  "-i (also -sys, as llama.cpp): the system message (default: -p/-f if given, else the template's own "
                  "default, if any)");
  // Diagnostics (footer above)
  sub->add_flag("--attn-stats", opt.attn_stats,
                "Attention-score statistics per layer and head (max/min/mean/std of the scaled "
                "scores, NaN/Inf, softmax entropy) and the residual abs-max per layer");
  sub->add_option("--attn-alert", attn_alert_value,
                  "Also alert when a scaled attention score exceeds this (implies --attn-stats; "
                  "default: no threshold, NaN/Inf always alert)");
  sub->add_flag("--moe-stats", opt.moe_stats,
                "Router statistics of a mixture-of-experts model per layer: tokens per expert, "
                "router entropy, top-k mass, experts never chosen (an error on a dense model)");
  sub->add_flag("--acf", opt.acf,
                "Autocorrelation of the generated token ids and top-1 probabilities: dominant "
                "period, strength and loop verdict");
  sub->add_flag("--stop-on-loop", opt.stop_on_loop,
                "Stop generating when the tokens loop (finish=loop; the test of --acf)");
  sub->callback([&action, sub] {
    opt.has_prompt = sub->count("--prompt") > 0;
    if (sub->count("--attn-alert") > 0) {
      opt.attn_stats = true;
      opt.attn_alert = attn_alert_value;
    }
    action = [] {
      check_engine_options(opt);
      check_run_options(opt);
      if (!opt.merge.empty()) return run_merge(opt);
      if (!opt.batch_file.empty()) return run_batch(opt);
      if (opt.interactive) return run_chat(opt);
      return run_single(opt);
    };
  });
}

}  // namespace llmctl::cli
