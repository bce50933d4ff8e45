// The zip reader: central directory, zip64, local headers, inflate.
#include <string>

#include "core/mapped_file.h"
#include "core/zip.h"
#include "targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = ckpt::MappedFile::from_memory(std::string(reinterpret_cast<const char*>(data), size), "fuzz.zip");
  try {
    ckpt::Limits lim;
    ckpt::ZipReader z(f->view(), lim);
    for (const auto& e : z.entries()) {
      std::string storage;
      (void)z.content(e, &storage, 1 << 20);
    }
  } catch (const ckpt::InputError&) {}
  return 0;
}
