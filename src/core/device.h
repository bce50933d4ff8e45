// --device without LibTorch, so that `ckpt load` refuses a bad one before it starts ckpt-torch
// (src/torch turns a DeviceSpec into a c10::Device and checks that CUDA is there).
#pragma once

#include <string>

namespace ckpt {

struct DeviceSpec {
  enum class Kind { Meta, Cpu, Cuda };
  Kind kind = Kind::Cpu;
  int index = -1;  // -1: none given
};

// meta | cpu | cuda, optionally :N. The grammar is c10::Device's for these kinds (an index on any of them,
// no sign, no leading zero, at most INT_MAX), so ckpt refuses exactly what ckpt-torch refuses.
// Throws std::invalid_argument saying what is expected (the command line names the option).
DeviceSpec parse_device_spec(const std::string& text);

}  // namespace ckpt
