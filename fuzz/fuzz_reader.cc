// Every format reader (torch.save zip, TorchScript, legacy stream, bare pickle), the counting and the
// renderers, end to end as `ckpt summary` runs them.
#include <string>

#include "summary_end_to_end.h"
#include "targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  summary_end_to_end(ckpt::MappedFile::from_memory(std::string(reinterpret_cast<const char*>(data), size), "fuzz.pt"));
  return 0;
}
