#!/usr/bin/env python3
"""Side-by-side timing of svd-embed's spectrum against numpy on the same float32 matrix, and the
largest difference of its singular values from numpy's float64 SVD.

    build/bench_svd_embed --rows 32000 --cols 2048 -t 2 --repeat 3 \\
        --save-matrix /tmp/A.npy --save-sigma /tmp/ours.txt
    python3 tools/svd_numpy_reference.py /tmp/A.npy /tmp/ours.txt --repeat 3 --threads 2

Times (median of --repeat runs, wall clock, float64 throughout as svd-embed's reference):
  numpy svd     numpy.linalg.svd(A.astype(float64), compute_uv=False)   (LAPACK gesdd)
  numpy gram    numpy.linalg.eigvalsh(A64.T @ A64)                       (dgemm + dsyevd)
and prints max |sigma_ours - sigma_svd| / sigma_max. Thread count: set before numpy loads
(OPENBLAS_NUM_THREADS, OMP_NUM_THREADS). The load average is printed with every run: the
machine may be shared, so compare the timings of one session side by side.
"""
import argparse
import os
import statistics
import sys
import time


def load_average():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("matrix", help=".npy float32 matrix (bench_svd_embed --save-matrix)")
    ap.add_argument("ours", nargs="?", help="our singular values, one per line (--save-sigma)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--skip-svd", action="store_true", help="time only the Gram + eigvalsh path")
    args = ap.parse_args()
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    import numpy as np  # after the thread variables

    a = np.load(args.matrix)
    print(f"matrix {a.shape} {a.dtype}; numpy {np.__version__}; {args.threads} threads")

    def timed(name, fn):
        times, out = [], None
        for r in range(args.repeat):
            t0 = time.perf_counter()
            out = fn()
            times.append(time.perf_counter() - t0)
            print(f"  {name} run {r + 1}: {times[-1]:.3f} s (load {load_average()})", flush=True)
        print(f"{name}: median {statistics.median(times):.3f} s")
        return out

    def gram_eig():
        a64 = a.astype(np.float64)
        return np.sqrt(np.maximum(np.linalg.eigvalsh(a64.T @ a64), 0))[::-1]

    s_gram = timed("numpy gram+eigvalsh", gram_eig)
    if args.skip_svd:
        ref = s_gram
    else:
        ref = timed("numpy svd", lambda: np.linalg.svd(a.astype(np.float64), compute_uv=False))
        print(f"numpy gram+eigvalsh vs numpy svd: max |d sigma| / sigma_max = "
              f"{np.max(np.abs(s_gram - ref)) / ref[0]:.3e}")
    if args.ours:
        ours = np.loadtxt(args.ours)
        if ours.shape != ref.shape:
            sys.exit(f"{args.ours}: {ours.shape[0]} values, numpy has {ref.shape[0]}")
        err = np.max(np.abs(ours - ref)) / ref[0]
        which = "numpy gram+eigvalsh" if args.skip_svd else "numpy svd"
        print(f"ours vs {which}: max |d sigma| / sigma_max = {err:.3e} "
              f"({'within' if err <= 1e-6 else 'OVER'} 1e-6)")


if __name__ == "__main__":
    main()
