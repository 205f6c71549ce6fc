#pragma once
// Shared libraries opened at run time (dlopen): the CUDA libraries llmctl uses but does not
// link, so that it starts where they are not installed (cublas_loader.cpp, cusolver_loader.cpp).

#include <mutex>
#include <string>
#include <vector>

namespace llmctl::cuda {

struct DynamicLibrary {
  void* handle = nullptr;  // never closed: handles created from it may outlive any caller
  std::string name;        // the file name that loaded

  // The address of `symbol`. Throws Error "<what>: <name> has no symbol <symbol> (expected
  // <expected>)".
  void* symbol(const char* symbol, const std::string& what, const std::string& expected) const;
  template <class Fn>
  void resolve(const char* sym, const std::string& what, const std::string& expected,
               Fn& out) const {
    out = reinterpret_cast<Fn>(symbol(sym, what, expected));
  }
};

// The first of `names` that dlopen loads. Throws Error "<what> could not be loaded: <the
// loader's message for each name>" with `hint` (what to install).
DynamicLibrary open_library(const std::vector<std::string>& names, const std::string& what,
                            const std::string& hint);

// The API table `load` returns, loaded once per process and kept; a load that throws is tried
// again by the next call. One table per Api type.
template <class Api>
const Api& load_once(Api (*load)()) {
  static std::mutex mutex;
  static Api api;
  static bool loaded = false;
  const std::lock_guard<std::mutex> lock(mutex);
  if (!loaded) {
    api = load();
    loaded = true;
  }
  return api;
}

}  // namespace llmctl::cuda
