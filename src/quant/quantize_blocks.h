#pragma once
// Internal to quant/: the per-block encoders behind quantize_row (quantize.h), by family.
//   quantize.cpp         round-to-nearest (RTN) encoders of the 32-element types, byte-identical
//                        to ggml's quantize_row_*_ref (rules in quantize.h)
//   quantize_legacy_weighted.cpp  Q4_0, Q4_1, Q5_0, Q5_1 with an importance matrix,
//                        llama.cpp's quantize_row_q*_impl (per row: sigma2 is the row's)
//   quantize_k.cpp       the k-quant encoders (Q2_K .. Q6_K), llama.cpp's algorithms: a level
//                        fit per sub-block (quantize_k_fit.cpp), then quantized sub-block scales
//   quantize_iq4.cpp     IQ4_NL and IQ4_XS, llama.cpp's non-linear 4-bit search
//   quantize_mxfp4.cpp   MXFP4, ggml's quantize_row_mxfp4_ref (nearest of 16 levels)
// Every encoder expects finite input (the callers check first).

#include <cstdint>

#include "core/ggml_type.h"

namespace llmctl::quant_detail {

void store_u16_le(uint8_t* p, uint16_t v);

// RTN encoders of one 32-element block (x[0..32) -> out[0..type_size)).
void quantize_block_rtn(GgmlType type, const float* x, uint8_t* out);

// Packs 32 quants q[j] in 0..31 (Q5_0, Q5_1) or 0..15 (Q4_0, Q4_1) after the block's header
// bytes: the low nibbles, two per byte (element j low, j + 16 high), and for the 5-bit types
// the fifth bits first, bit j of qh[0..4) as a little-endian u32.
void pack_block_quants(GgmlType type, const int* q, uint8_t* out);

// One row x[0..n) of Q4_0, Q4_1, Q5_0 or Q5_1 (n a multiple of 32) with the importance
// matrix's column weights qw[0..n) (quantize_legacy_weighted.cpp): llama.cpp's bytes, a whole
// row at a time because its weights use the row's mean x^2. qw[j] >= 0.
void quantize_row_legacy_weighted(GgmlType type, const float* x, const float* qw, uint8_t* out,
                                  int64_t n);

// K-quant encoders (quantize_k.cpp) of one 256-element super-block (Q2_K .. Q6_K): llama.cpp's
// reference quantizer when w == nullptr, its importance-weighted one otherwise (w: the
// importance matrix's 256 column weights of this super-block).
void quantize_block_k(GgmlType type, const float* x, const float* w, uint8_t* out);

// IQ4_NL (32 elements) and IQ4_XS (256) encoders (quantize_iq4.cpp), llama.cpp's search; w as
// for quantize_block_k (nullptr: weights x^2).
void quantize_block_iq4(GgmlType type, const float* x, const float* w, uint8_t* out);

// One 32-element MXFP4 block (quantize_mxfp4.cpp): ggml's bytes; no importance weights.
void quantize_block_mxfp4(const float* x, uint8_t* out);

}  // namespace llmctl::quant_detail
