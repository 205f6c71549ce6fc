#pragma once
// Scaling `llmctl run --batch` out over the schedulers people already run (a Slurm array
// job, a Kubernetes indexed Job): N processes read the same input, each answers its own
// share of the lines, and one merge puts their records back together (docs/batch.md).
//
//   --shard K/N   this process answers the lines whose "index" (batch_io.h: the 0-based
//                 physical line number) is K mod N; 0 <= K < N. Every other line is left to
//                 the other shards: no record, not counted in the summary. --resume works
//                 per shard (each shard appends to its own output).
//   --merge F...  reads shard outputs and writes every record once, sorted by index, each
//                 line byte for byte as its shard wrote it: the records of one unsharded run
//                 (which writes them in completion order; "index" matches them up).
//                 A line that is not a record (the cut-off last line of an interrupted shard,
//                 which --resume leaves on its own line) is skipped, as --resume skips it.
//                 An index answered twice is an error. With --batch IN as well, every
//                 request line of IN must have exactly one record and no record may name a
//                 line IN does not have.

#include <cstdint>
#include <iosfwd>
#include <set>
#include <string>
#include <vector>

#include "cli/batch_io.h"

namespace llmctl::cli {

struct BatchShard {
  int64_t k = 0;
  int64_t n = 1;
  bool holds(int64_t index) const { return index % n == k; }
};

// "K/N" with 0 <= K < N (decimal integers). Throws Error saying what is wrong.
BatchShard parse_batch_shard(const std::string& text);

// Drops the lines another shard answers.
void keep_shard_lines(std::vector<BatchLine>& lines, const BatchShard& shard);

struct ShardOutput {
  std::string name;  // for messages
  std::istream* in = nullptr;
};

struct MergedRecords {
  std::vector<std::string> lines;  // sorted by index, without their "\n"
  std::vector<int64_t> indices;    // the index of each line
  int64_t n_not_records = 0;       // lines skipped: not a complete record
};

// Every record of the outputs, sorted by index. Throws Error (naming both places) when an
// index has two records.
MergedRecords merge_batch_outputs(const std::vector<ShardOutput>& outputs);

// With the input's lines: throws Error when a request line has no record (naming the first
// few as line numbers) or a record names a line the input does not have.
void check_merge_complete(const MergedRecords& merged, const std::vector<BatchLine>& input,
                          const std::string& input_name);

}  // namespace llmctl::cli
