#include "backend/cuda/cublas_loader.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <mutex>
#include <string>

#include "core/error.h"

namespace llmctl::cuda {

namespace {

template <class Fn>
void resolve(void* lib, const char* symbol, const std::string& lib_name, Fn& out) {
  void* p = dlsym(lib, symbol);
  if (p == nullptr)
    throw Error(fmt::format("cuBLAS: {} has no symbol {} (expected cuBLAS {}.x)", lib_name, symbol,
                            CUBLAS_VER_MAJOR));
  out = reinterpret_cast<Fn>(p);
}

CublasApi load() {
  const std::string names[] = {fmt::format("libcublas.so.{}", CUBLAS_VER_MAJOR), "libcublas.so"};
  std::string errors;
  for (const std::string& name : names) {
    // Never closed: the handles created from it live as long as the backends.
    void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* why = dlerror();
      errors += fmt::format("{}{}", errors.empty() ? "" : "; ", why != nullptr ? why : name);
      continue;
    }
    CublasApi api;
    resolve(lib, "cublasCreate_v2", name, api.create);
    resolve(lib, "cublasDestroy_v2", name, api.destroy);
    resolve(lib, "cublasSetStream_v2", name, api.set_stream);
    resolve(lib, "cublasGemmEx", name, api.gemm_ex);
    return api;
  }
  throw Error(fmt::format("cuBLAS {} could not be loaded: {}", CUBLAS_VER_MAJOR, errors),
              "install the CUDA toolkit's cuBLAS (libcublas) or add its directory to "
              "LD_LIBRARY_PATH, or keep the batch-invariant CUDA matmul (no cuBLAS needed)");
}

}  // namespace

const CublasApi& cublas_api() {
  static std::mutex mutex;
  static CublasApi api;
  static bool loaded = false;
  const std::lock_guard<std::mutex> lock(mutex);
  if (!loaded) {
    api = load();
    loaded = true;
  }
  return api;
}

}  // namespace llmctl::cuda
