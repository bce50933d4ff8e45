#include "core/device.h"

#include <fmt/format.h>

#include <charconv>
#include <stdexcept>

#include "core/error.h"

namespace ckpt {

DeviceSpec parse_device_spec(const std::string& text) {
  const auto bad = [] { return std::invalid_argument("expected meta, cpu, cuda or cuda:N"); };
  const size_t colon = text.find(':');
  const std::string name = text.substr(0, colon);
  DeviceSpec d;
  if (name == "meta") d.kind = DeviceSpec::Kind::Meta;
  else if (name == "cpu") d.kind = DeviceSpec::Kind::Cpu;
  else if (name == "cuda") d.kind = DeviceSpec::Kind::Cuda;
  else throw bad();
  if (colon == std::string::npos) return d;
  const char* first = text.data() + colon + 1;
  const char* last = text.data() + text.size();
  // Digits only: no sign, no space, and no leading zero ("cuda:01"), as c10 parses it.
  if (first == last || *first < '0' || *first > '9' || (*first == '0' && last - first > 1)) throw bad();
  const auto [end, ec] = std::from_chars(first, last, d.index);
  if (ec != std::errc() || end != last) throw bad();
  return d;
}

}  // namespace ckpt
