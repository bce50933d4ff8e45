// The .pt2 reader's JSON side: the input is split at NUL bytes into models/model.json, the weights
// config and the constants config of a pt2 archive built here in memory (stored zip, with one 256-byte
// weight_0 and tensor_0), so the fuzzer spends its time on the JSON the reader interprets rather than on
// zip structure (fuzz_reader covers that). Counting, findings, the security scan and the three renderers
// run on whatever it reads.
#include <string>
#include <vector>

#include "summary_end_to_end.h"
#include "targets.h"

namespace {

void put16(std::string& s, uint32_t v) {
  s += static_cast<char>(v & 0xff);
  s += static_cast<char>((v >> 8) & 0xff);
}
void put32(std::string& s, uint32_t v) {
  put16(s, v & 0xffff);
  put16(s, v >> 16);
}

// A stored zip of (name, bytes) members: local headers, central directory, end record; CRCs left 0.
std::string stored_zip(const std::vector<std::pair<std::string, std::string>>& members) {
  std::string out, central;
  for (const auto& [name, data] : members) {
    const uint32_t at = static_cast<uint32_t>(out.size());
    put32(out, 0x04034b50);
    put16(out, 20), put16(out, 0), put16(out, 0), put16(out, 0), put16(out, 0);
    put32(out, 0), put32(out, static_cast<uint32_t>(data.size())), put32(out, static_cast<uint32_t>(data.size()));
    put16(out, static_cast<uint32_t>(name.size())), put16(out, 0);
    out += name;
    out += data;
    put32(central, 0x02014b50);
    put16(central, 20), put16(central, 20), put16(central, 0), put16(central, 0), put16(central, 0), put16(central, 0);
    put32(central, 0), put32(central, static_cast<uint32_t>(data.size())), put32(central, static_cast<uint32_t>(data.size()));
    put16(central, static_cast<uint32_t>(name.size())), put16(central, 0), put16(central, 0), put16(central, 0),
        put16(central, 0);
    put32(central, 0), put32(central, at);
    central += name;
  }
  const uint32_t cd = static_cast<uint32_t>(out.size());
  out += central;
  put32(out, 0x06054b50);
  put16(out, 0), put16(out, 0), put16(out, static_cast<uint32_t>(members.size())),
      put16(out, static_cast<uint32_t>(members.size()));
  put32(out, static_cast<uint32_t>(central.size())), put32(out, cd), put16(out, 0);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> parts(1);
  for (size_t k = 0; k < size; ++k) {
    if (data[k] == 0 && parts.size() < 3) parts.emplace_back();
    else parts.back() += static_cast<char>(data[k]);
  }
  std::vector<std::pair<std::string, std::string>> members{{"f/archive_format", "pt2"},
                                                           {"f/archive_version", "0"},
                                                           {"f/models/model.json", parts[0]},
                                                           {"f/data/weights/weight_0", std::string(256, '\1')},
                                                           {"f/data/constants/tensor_0", std::string(256, '\2')}};
  if (parts.size() > 1) members.push_back({"f/data/weights/model_weights_config.json", parts[1]});
  if (parts.size() > 2) members.push_back({"f/data/constants/model_constants_config.json", parts[2]});
  summary_end_to_end(ckpt::MappedFile::from_memory(stored_zip(members), "fuzz.pt2"));
  return 0;
}
