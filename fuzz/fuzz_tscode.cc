// The TorchScript code/ declaration parser.
#include <string_view>

#include "core/torchscript.h"
#include "targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)ckpt::parse_torchscript_code("__torch__", std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
