#include "torch/script.h"

#include <caffe2/serialize/read_adapter_interface.h>
#include <fmt/format.h>
#include <torch/csrc/jit/runtime/operator.h>
#include <torch/csrc/jit/serialization/import.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <regex>
#include <set>
#include <string_view>

#include "core/storage.h"
#include "torch/materialize.h"

namespace ckpt::torchb {
namespace {

// The archive as LibTorch reads it, with the given byte ranges (tensor payloads) read as zeros.
class ZeroedRangesAdapter : public caffe2::serialize::ReadAdapterInterface {
 public:
  ZeroedRangesAdapter(std::shared_ptr<MappedFile> f, std::vector<std::pair<uint64_t, uint64_t>> zero)
      : f_(std::move(f)), zero_(std::move(zero)) {
    std::sort(zero_.begin(), zero_.end());
  }
  size_t size() const override { return static_cast<size_t>(f_->size()); }
  size_t read(uint64_t pos, void* buf, size_t n, const char* /*what*/) const override {
    const uint64_t size = f_->size();
    if (pos >= size) return 0;
    n = static_cast<size_t>(std::min<uint64_t>(n, size - pos));
    const uint8_t* src = f_->view().data();
    uint8_t* dst = static_cast<uint8_t*>(buf);
    uint64_t at = pos;
    const uint64_t end = pos + n;
    auto it = std::upper_bound(zero_.begin(), zero_.end(), std::make_pair(pos, UINT64_MAX));
    if (it != zero_.begin()) --it;
    while (at < end) {
      while (it != zero_.end() && it->second <= at) ++it;
      if (it != zero_.end() && it->first <= at) {  // inside a zeroed range
        const uint64_t stop = std::min(end, it->second);
        std::memset(dst + (at - pos), 0, stop - at);
        at = stop;
      } else {
        const uint64_t stop = it == zero_.end() ? end : std::min(end, it->first);
        std::memcpy(dst + (at - pos), src + at, stop - at);
        at = stop;
      }
    }
    return n;
  }

 private:
  std::shared_ptr<MappedFile> f_;
  std::vector<std::pair<uint64_t, uint64_t>> zero_;
};

// "Unknown builtin op: aten::x" -> the operators the code/ calls that this LibTorch has no schema for.
[[noreturn]] void rethrow_load_error(const Checkpoint& ck, const std::exception& e) {
  std::string what = e.what();
  const size_t nl = what.find_first_not_of("\n ");
  what = what.substr(nl == std::string::npos ? 0 : nl);
  if (what.find("Unknown builtin op") == std::string::npos && what.find("Unknown type name") == std::string::npos) {
    // One line: LibTorch's first two lines (often a schema, then the reason) and where in code/ it stopped.
    std::string brief;
    size_t lines = 0;
    for (size_t at = 0; at < what.size() && lines < 2;) {
      size_t nl = what.find('\n', at);
      if (nl == std::string::npos) nl = what.size();
      std::string line = what.substr(at, nl - at);
      line.erase(0, line.find_first_not_of(" \t"));
      if (!line.empty()) { brief += (lines++ ? " " : "") + line; }
      at = nl + 1;
    }
    if (brief.size() > 400) brief = brief.substr(0, 400) + "...";
    static const std::regex where(R"re(File "([^"]+)", line ([0-9]+))re");
    std::smatch w;
    if (std::regex_search(what, w, where)) brief += fmt::format(" (at {}:{})", w[1].str(), w[2].str());
    throw UnsupportedError(ck.path,
                           fmt::format("LibTorch {} cannot load this TorchScript archive: {}", libtorch_version(), brief));
  }
  static const std::regex call(R"(\b(?:torch|ops\.(aten|prim|quantized|[a-z_]+))\.([A-Za-z_][A-Za-z0-9_]*)\()");
  std::map<std::string, std::string> missing;  // op -> first place
  for (const TsClass& c : ck.ts_classes)
    for (const TsMethod& m : c.methods)
      for (const TsLine& l : m.body)
        for (std::sregex_iterator i(l.text.begin(), l.text.end(), call), e2; i != e2; ++i) {
          const std::string ns = (*i)[1].matched ? (*i)[1].str() : "aten";
          const std::string op = ns + "::" + (*i)[2].str();
          if (missing.count(op)) continue;
          bool known = !torch::jit::getAllOperatorsFor(c10::Symbol::fromQualString(op)).empty();
          if (!known && ns == "aten")  // torch.X may also name a prim:: builtin
            known = !torch::jit::getAllOperatorsFor(c10::Symbol::fromQualString("prim::" + (*i)[2].str())).empty();
          if (!known) missing.emplace(op, fmt::format("{}:{}", c.file, l.line));
        }
  static const std::regex named(R"(Unknown builtin op: ([A-Za-z_][A-Za-z0-9_]*::[A-Za-z_][A-Za-z0-9_]*))");
  std::smatch m;
  if (std::regex_search(what, m, named) && !missing.count(m[1].str())) missing.emplace(m[1].str(), "");
  std::string list;
  for (const auto& [op, where] : missing) list += (list.empty() ? "" : ", ") + op + (where.empty() ? "" : " (" + where + ")");
  if (list.empty()) list = what.substr(0, what.find('\n'));
  throw UnsupportedError(ck.path,
                         fmt::format("LibTorch {} lacks operators this TorchScript archive calls: {}", libtorch_version(), list));
}

torch::jit::Module checked_load(const Checkpoint& ck, std::shared_ptr<caffe2::serialize::ReadAdapterInterface> rai,
                                c10::Device device) {
  try {
    return torch::jit::load(std::move(rai), device);
  } catch (const std::exception& e) { rethrow_load_error(ck, e); }
}

}  // namespace

torch::jit::Module load_structure(const Checkpoint& ck) {
  std::vector<std::pair<uint64_t, uint64_t>> zero;
  StorageIndex index(ck);
  std::set<const Storage*> seen;
  for (const Tensor& t : ck.tensors) {
    const Storage* s = t.storage.empty() ? nullptr : index.find(t.storage);
    if (!s || !s->present || s->source || !seen.insert(s).second) continue;
    const ByteView b = index.bytes(*s);
    const uint64_t off = static_cast<uint64_t>(b.address() - ck.file->view().address());
    zero.emplace_back(off, off + b.size());
  }
  auto rai = std::make_shared<ZeroedRangesAdapter>(ck.file, std::move(zero));
  try {
    return torch::jit::load(rai, c10::Device(c10::kMeta));
  } catch (const std::exception& e) {
    if (std::string_view(e.what()).find("Unknown builtin op") != std::string_view::npos) rethrow_load_error(ck, e);
    // Some archives run operators while loading that have no meta kernel (frozen modules: aten::equal on
    // their constants). On CPU the zeroed payloads cost memory but are still not read from the file.
    return checked_load(ck, rai, c10::Device(c10::kCPU));
  }
}

torch::jit::Module load_plain(const Checkpoint& ck, c10::Device device) {
  return checked_load(ck, std::make_shared<ZeroedRangesAdapter>(ck.file, std::vector<std::pair<uint64_t, uint64_t>>{}), device);
}

std::vector<std::pair<std::string, at::Tensor>> module_state(const torch::jit::Module& m) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& p : m.named_parameters(/*recurse=*/true)) out.emplace_back(p.name, p.value);
  for (const auto& b : m.named_buffers(/*recurse=*/true)) out.emplace_back(b.name, b.value);
  return out;
}

void assign(torch::jit::Module& m, const std::string& path, const at::Tensor& t) {
  torch::jit::Module owner = m;
  size_t start = 0;
  for (size_t dot = path.find('.'); dot != std::string::npos; dot = path.find('.', start)) {
    owner = owner.attr(path.substr(start, dot - start)).toModule();
    start = dot + 1;
  }
  owner.setattr(path.substr(start), t);
}

}  // namespace ckpt::torchb
