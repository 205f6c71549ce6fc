// main() of test_gpu_backend (tests/gpu/test_gpu_ops.cpp, test_gpu_attention.cpp): exits 77
// when no GPU is visible (gpu_main.h).
#define CATCH_CONFIG_RUNNER
#include "gpu_main.h"

int main(int argc, char** argv) {
  return llmctl::test::run_gpu_tests(argc, argv, "test_gpu_backend");
}
