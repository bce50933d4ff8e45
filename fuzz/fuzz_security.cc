// The security scan: every pickle of a file, nested blobs, zip name checks.
#include <string>

#include "core/findings.h"
#include "targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = ckpt::MappedFile::from_memory(std::string(reinterpret_cast<const char*>(data), size), "fuzz.pt");
  ckpt::Limits lim;
  lim.pickle_ops = 1'000'000;
  try {
    (void)ckpt::scan_findings(ckpt::scan_pickles(*f, lim));
  } catch (const ckpt::InputError&) {}
  return 0;
}
