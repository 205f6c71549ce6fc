#pragma once
// The CPU's Gram eigen-decomposition (Backend::gram_eigen and gram_eigen_checked in
// backend.h): BLAS syrk for G, LAPACK dsyev_2stage for its eigenvalues, dsyevr for its
// eigenvectors. The accuracy argument is in diag/gram_eigen.h, the error model in
// core/gram_error.h.
//
//   gram_eigen_f64      G from float64 products (dsyrk over blocks of 2048 rows widened to
//                       float64).
//   gram_eigen_checked  G from float32 products first (ssyrk over blocks of 2048 rows, the
//                       blocks summed in float64: twice as fast), its rounding measured by
//                       power iteration on G32 - A^T A with A^T A x in float64 (3 steps on 2
//                       random vectors, twice the largest ||E x|| / ||x|| seen); when the
//                       per-sigma bound exceeds tolerance / 2, G is formed again in float64.
// Both run BLAS on `n_threads` threads (the eigenvalue reduction on one: see the .cpp) and stop
// between blocks of the Gram on Ctrl-C (core/stop_point.h). Throws Error when a size does not
// fit LAPACK's 32-bit integers or LAPACK fails. The arguments are those backend.cpp checked.

#include <cstdint>

#include "backend/backend.h"

namespace llmctl::cpu {

GramEigen gram_eigen_f64(const float* a, int64_t m, int64_t n, bool want_vectors, int n_threads);
GramEigen gram_eigen_checked(const float* a, int64_t m, int64_t n, double tolerance,
                             bool want_vectors, int n_threads);

// Sets the BLAS library's thread count (OpenBLAS; no-op for another BLAS).
void set_blas_threads(int n);

}  // namespace llmctl::cpu
