// The JSON headers a Hugging Face model folder holds, through the readers that read them: the input, split
// at NUL bytes, becomes config.json, model.safetensors.index.json and the JSON header of the one shard
// that index may name (model-00001-of-00001.safetensors, or model.safetensors when the index part is
// empty: an 8-byte length, the header, 256 zero bytes of data). They are served from memory by a vfs::Remote under mem://, so read_checkpoint takes the folder
// (read_hf_config, read_sharded, read_safetensors) and the lone shard (read_safetensors and its config)
// exactly as it takes a local or remote one; counting, findings (hf-config) and the renderers run on what
// they read. A DCP .metadata is a pickle: fuzz_pickle and fuzz_reader cover it.
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "core/vfs.h"
#include "summary_end_to_end.h"
#include "targets.h"

namespace {

constexpr std::string_view kDir = "mem://m";
constexpr const char* kShard = "model-00001-of-00001.safetensors";

class MemoryFolder : public ckpt::vfs::Remote {
 public:
  std::map<std::string, std::string> files;  // name -> bytes, in the one folder mem://m

  bool handles(std::string_view path) const override { return path.rfind("mem://", 0) == 0; }
  ckpt::vfs::Kind kind(const std::string& path) override {
    if (path == kDir) return ckpt::vfs::Kind::Dir;
    return find(path) ? ckpt::vfs::Kind::File : ckpt::vfs::Kind::Missing;
  }
  std::vector<ckpt::vfs::Entry> list(const std::string& dir) override {
    if (dir != kDir) throw ckpt::InputError(dir, "not a folder");
    std::vector<ckpt::vfs::Entry> out;
    for (const auto& [name, bytes] : files) out.push_back({name, false, bytes.size()});
    return out;
  }
  std::shared_ptr<ckpt::MappedFile> open(const std::string& path) override {
    const std::string* b = find(path);
    if (!b) throw ckpt::InputError(path, "no such file");
    return ckpt::MappedFile::from_memory(*b, path);
  }

 private:
  const std::string* find(const std::string& path) const {
    if (path.size() <= kDir.size() + 1 || path.compare(0, kDir.size() + 1, std::string(kDir) + "/") != 0) return nullptr;
    const auto it = files.find(path.substr(kDir.size() + 1));
    return it == files.end() ? nullptr : &it->second;
  }
};

MemoryFolder& folder() {
  static std::shared_ptr<MemoryFolder> f = [] {
    auto m = std::make_shared<MemoryFolder>();
    ckpt::vfs::install(m);
    return m;
  }();
  return *f;
}

void read_and_render(const std::string& path) {
  ckpt::Limits lim;
  try {
    ckpt::Checkpoint ck = ckpt::read_checkpoint(path, lim);
    ckpt::Summary s = ckpt::summarize(ck);
    s.findings = ckpt::findings(ck, s);
    ckpt::RenderOptions o;
    o.depth = -1;
    o.tensors = true;
    (void)ckpt::render_summary_text(s, o);
    (void)ckpt::summary_json_text(s);
  } catch (const ckpt::InputError&) {}
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  std::string part[3];
  size_t at = 0;
  for (int k = 0; k < 3 && at <= in.size(); ++k) {
    const size_t nul = k < 2 ? in.find('\0', at) : std::string_view::npos;
    part[k] = std::string(in.substr(at, nul == std::string_view::npos ? std::string_view::npos : nul - at));
    at = nul == std::string_view::npos ? in.size() + 1 : nul + 1;
  }
  MemoryFolder& m = folder();
  m.files.clear();
  m.files["config.json"] = part[0];
  if (!part[1].empty()) m.files["model.safetensors.index.json"] = part[1];
  std::string shard;
  const uint64_t n = part[2].size();
  for (int k = 0; k < 8; ++k) shard += static_cast<char>((n >> (8 * k)) & 0xff);
  shard += part[2];
  shard.append(256, '\0');
  const std::string name = part[1].empty() ? "model.safetensors" : kShard;
  m.files[name] = shard;
  read_and_render(std::string(kDir));
  read_and_render(std::string(kDir) + "/" + name);
  return 0;
}
