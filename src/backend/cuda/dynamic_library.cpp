#include "backend/cuda/dynamic_library.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include "core/error.h"

namespace llmctl::cuda {

void* DynamicLibrary::symbol(const char* sym, const std::string& what,
                             const std::string& expected) const {
  void* p = dlsym(handle, sym);
  if (p == nullptr)
    throw Error(fmt::format("{}: {} has no symbol {} (expected {})", what, name, sym, expected));
  return p;
}

DynamicLibrary open_library(const std::vector<std::string>& names, const std::string& what,
                            const std::string& hint) {
  std::string errors;
  for (const std::string& name : names) {
    void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib != nullptr) return DynamicLibrary{lib, name};
    const char* why = dlerror();
    errors += fmt::format("{}{}", errors.empty() ? "" : "; ", why != nullptr ? why : name);
  }
  throw Error(fmt::format("{} could not be loaded: {}", what, errors), hint);
}

}  // namespace llmctl::cuda
