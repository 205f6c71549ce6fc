// llmctl run --merge SHARD_OUTPUT... [--batch IN]: the records of `run --batch --shard K/N`
// processes as one run's, sorted by index, on stdout (batch_shard.h). No model is loaded.
//
// Nothing is written unless the merge is whole: an index answered twice, or with --batch a
// request line without a record, is an error (exit 1) before the first record goes out, so a
// script never takes a partial merge for a finished one.
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <memory>

#include "cli/batch_shard.h"
#include "cli/run_session.h"
#include "core/error.h"

namespace llmctl::cli {

int run_merge(const RunOptions& opt) {
  std::vector<std::unique_ptr<std::ifstream>> files;
  std::vector<ShardOutput> outputs;
  for (const std::string& path : opt.merge) {
    files.push_back(std::make_unique<std::ifstream>(path, std::ios::binary));
    if (!*files.back()) throw FileError(path, "cannot open");
    outputs.push_back({path, files.back().get()});
  }
  const MergedRecords merged = merge_batch_outputs(outputs);
  if (!opt.batch_file.empty()) {
    check_merge_complete(merged, read_batch_file(opt.batch_file),
                         opt.batch_file == "-" ? "<stdin>" : opt.batch_file);
  }
  for (const std::string& line : merged.lines) write_out(line + "\n");
  if (merged.n_not_records > 0)
    fmt::print(stderr, "llmctl: note: skipped {} line{} that {} not a complete record\n",
               merged.n_not_records, merged.n_not_records == 1 ? "" : "s",
               merged.n_not_records == 1 ? "is" : "are");
  const int code = finish_exit_code();
  fmt::print(stderr, "llmctl-merge: outputs={} records={} skipped_lines={}\n", outputs.size(),
             merged.lines.size(), merged.n_not_records);
  return code;
}

}  // namespace llmctl::cli
