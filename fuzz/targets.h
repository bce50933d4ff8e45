// libFuzzer entry points, one per parser. Each file defines LLVMFuzzerTestOneInput; built with clang's
// -fsanitize=fuzzer under -DCKPT_FUZZ=ON, and always linked with replay_main.cc into a plain program
// that replays corpora as ctest tests (bloaty's fuzz_driver.cc pattern).
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
