#!/usr/bin/env bash
# Seed corpora for fuzz_safetensors and fuzz_hf_config (tests/fuzz/corpus/{safetensors,hf_config}/).
#   bash tests/fuzz/make_hf_seeds.sh
# Small valid and invalid files; names carry no suffix so the repository's ignore rules
# (*.safetensors, model files) keep them. The config seeds are the test fixtures' config.json
# files and variants of them.
set -euo pipefail
cd "$(dirname "$0")/../.."
ST=tests/fuzz/corpus/safetensors
HC=tests/fuzz/corpus/hf_config
mkdir -p "$ST" "$HC"

# u64 little-endian length, then the header, then $3 bytes of data (a repeating pattern).
st() {
  local out=$1 header=$2 nbytes=$3 n=${#2} le=""
  for i in 0 1 2 3 4 5 6 7; do le+=$(printf '\\x%02x' $(((n >> (8 * i)) & 255))); done
  { printf "$le"; printf '%s' "$header"; head -c "$nbytes" /dev/zero | tr '\0' '\077'; } > "$ST/$out"
}
st valid_three_dtypes '{"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},"b":{"dtype":"F16","shape":[4],"data_offsets":[24,32]},"c":{"dtype":"BF16","shape":[],"data_offsets":[32,34]}}' 34
st valid_empty '{}' 0
st valid_zero_dim '{"z":{"dtype":"F32","shape":[0,5],"data_offsets":[0,0]},"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}' 4
st bad_overlap '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}' 12
st bad_dtype '{"a":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}}' 8
st bad_size '{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}' 8
st bad_past_end '{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}' 4
st bad_duplicate '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}' 4
st bad_nested '{"a":[[[[[[[[[[1]]]]]]]]]]}' 0
st bad_json '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]' 4
printf '\xff\xff\xff\xff\xff\xff\xff\x7f{}' > "$ST/bad_length"
# The header of a real checkpoint without its data (past the end), cut to 4 KiB.
n=$(od -An -tu8 -N8 tests/fixtures/hf_tiny_qwen2/model.safetensors | tr -d ' ')
head -c $((8 + n)) tests/fixtures/hf_tiny_qwen2/model.safetensors | head -c 4096 > "$ST/qwen2_header_only"

cp tests/fixtures/hf_tiny_llama/config.json "$HC/llama_llama3_rope"
cp tests/fixtures/hf_tiny_qwen2/config.json "$HC/qwen2"
sed -e 's/"head_dim": 16,//' -e 's/"num_attention_heads": 4/"num_attention_heads": 3/' \
  tests/fixtures/hf_tiny_llama/config.json > "$HC/bad_heads_do_not_divide"
sed -e 's/"rms_norm_eps": 1e-05/"rms_norm_eps": -1/' tests/fixtures/hf_tiny_llama/config.json > "$HC/bad_eps"
sed -e 's/"vocab_size": 300/"vocab_size": 0/' tests/fixtures/hf_tiny_llama/config.json > "$HC/bad_vocab_zero"
printf '%s' '{"architectures":["MistralForCausalLM"],"vocab_size":32,"hidden_size":8,"num_hidden_layers":1,"num_attention_heads":2,"num_key_value_heads":1,"intermediate_size":16,"max_position_embeddings":64,"sliding_window":32,"rope_scaling":{"type":"linear","factor":2.0},"eos_token_id":[2,3]}' > "$HC/mistral_linear"
printf '%s' '{"architectures":["LlamaForCausalLM"],"vocab_size":32,"hidden_size":8,"num_hidden_layers":1,"num_attention_heads":2,"intermediate_size":16,"max_position_embeddings":64,"rope_theta":1e400}' > "$HC/bad_rope_theta"
printf '%s' '[1,2,{"a":null}]' > "$HC/bad_not_object"
# Found by fuzzing (2026-11-30): a number that overflows a double made nlohmann throw
# out_of_range, which escaped as an unexpected exception.
st bad_number_overflow '{"a":{"dtype":"F32","shape":[1e400],"data_offsets":[0,4]}}' 0
