#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

namespace ckpt::cli {
extern const bool kLinksLibTorch = false;  // src/cli/inputs.h: the tests link no LibTorch
}
