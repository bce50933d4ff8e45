// The inert pickle VM and the plain-JSON view of what it builds.
#include <string>

#include "core/mapped_file.h"
#include "core/pickle.h"
#include "targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = ckpt::MappedFile::from_memory(std::string(reinterpret_cast<const char*>(data), size), "fuzz.pkl");
  ckpt::Limits lim;
  lim.pickle_ops = 1'000'000;  // keep each run short; limits themselves are tested elsewhere
  try {
    ckpt::Heap heap;
    ckpt::Unpickled u = ckpt::unpickle(f->view(), 0, heap, lim);
    (void)ckpt::plain_json(u.root).dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  } catch (const ckpt::InputError&) {}
  return 0;
}
