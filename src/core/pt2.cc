// The .pt2 reader: archive layout, weight and constant configs, nested torch.save blobs (state dicts,
// pickled weights, sample inputs) read from sub-views of the file. The layouts are drawn in pt2.h; the
// graph (specs, census, FLOPs, module tree) is read by pt2_graph.cc. Summary reads the zip directory,
// the JSON members and the small pickles only: weight bytes stay references (member + local header).
#include "core/pt2.h"

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (fmt 11 has it only there)

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "core/storage.h"
#include "core/torch_pickle.h"

namespace ckpt {
namespace pt2 {

namespace {

// Thrown by the parse callback (nlohmann's callback cannot fail the parse with a message of its own).
struct ParseStop {
  std::string msg, pointer;
};

constexpr size_t kMaxDims = 1024;

template <typename Json>
struct Checker : nlohmann::json_sax<Json> {
  using S = nlohmann::json_sax<Json>;
  struct Frame {
    bool array = false;
    size_t index = 0;
    std::string key;
    std::set<std::string> keys;
    bool dims = false;  // an array of sizes / strides
  };
  explicit Checker(uint64_t depth) : max_depth(depth) {}
  uint64_t max_depth;
  std::vector<Frame> frames;
  std::string error;
  size_t error_at = 0;

  std::string pointer() const {
    std::string p;
    for (const Frame& f : frames) p += "/" + (f.array ? std::to_string(f.index) : f.key);
    return p;
  }
  bool item() {
    if (!frames.empty() && frames.back().array) {
      Frame& f = frames.back();
      if (f.dims && f.index >= kMaxDims) {
        frames.pop_back();
        throw ParseStop{fmt::format("more than {} dimensions", kMaxDims), pointer()};
      }
      ++f.index;
    }
    return true;
  }
  bool open(bool array) {
    if (frames.size() >= max_depth) throw ParseStop{fmt::format("nesting deeper than {}", max_depth), pointer()};
    const bool dims = !frames.empty() && !frames.back().array && (frames.back().key == "sizes" || frames.back().key == "strides");
    frames.emplace_back();
    frames.back().array = array;
    frames.back().dims = array && dims;
    return true;
  }
  bool close() {
    frames.pop_back();
    return item();
  }
  bool null() override { return item(); }
  bool boolean(bool) override { return item(); }
  bool number_integer(typename S::number_integer_t) override { return item(); }
  bool number_unsigned(typename S::number_unsigned_t) override { return item(); }
  bool number_float(typename S::number_float_t, const typename S::string_t&) override { return item(); }
  bool string(typename S::string_t&) override { return item(); }
  bool binary(typename S::binary_t&) override { return item(); }
  bool start_object(std::size_t) override { return open(false); }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(true); }
  bool end_array() override { return close(); }
  bool key(typename S::string_t& k) override {
    Frame& f = frames.back();
    f.key = k;
    if (!f.keys.insert(k).second) throw ParseStop{fmt::format("key '{}' appears twice in one object", k), pointer()};
    return true;
  }
  bool parse_error(std::size_t pos, const std::string&, const nlohmann::detail::exception& ex) override {
    error_at = pos;
    error = ex.what();
    return false;
  }
};

}  // namespace

template <typename Json>
Doc<Json> parse_doc(const ZipReader& zip, const ZipEntry& e, const std::string& file, const Limits& lim) {
  Doc<Json> d;
  d.file = file;
  d.member = std::string(e.name);
  // torch reads members through miniz, so a deflated JSON member is read too (bounded by inflate-bytes)
  std::string inflated;
  const ByteView v = zip.content(e, &inflated, std::min(lim.inflate_bytes, lim.pickle_bytes));
  if (v.size() > lim.pickle_bytes)
    v.fail(0, fmt::format("JSON member of {} bytes exceeds the limit of {} (--limit pickle-bytes)", v.size(), lim.pickle_bytes));
  // A SAX pass first (linear; nlohmann's callback parser is not on long arrays): bounded nesting, no key
  // twice in one object (Python's json keeps the last silently; a name given twice is a broken writer or
  // a file made to show one thing and load another), at most kMaxDims sizes / strides, and where it
  // stopped as a JSON pointer. Then the DOM.
  Checker<Json> check(std::min<uint64_t>(lim.pickle_depth, 10000));
  try {
    if (!Json::sax_parse(v.data(), v.data() + v.size(), &check))
      v.fail(check.error_at > 0 ? check.error_at - 1 : 0, "broken JSON: " + check.error);
  } catch (const ParseStop& s) { d.fail(s.pointer, s.msg); }
  d.j = Json::parse(v.data(), v.data() + v.size());
  return d;
}
template Doc<nlohmann::json> parse_doc(const ZipReader&, const ZipEntry&, const std::string&, const Limits&);
template Doc<nlohmann::ordered_json> parse_doc(const ZipReader&, const ZipEntry&, const std::string&, const Limits&);

const DType* dtype_of(int64_t st) {
  // torch/_export/serde/schema.py ScalarType (not ATen's numbering)
  static const std::map<int64_t, const char*> names{{1, "uint8"},
                                                    {2, "int8"},
                                                    {3, "int16"},
                                                    {4, "int32"},
                                                    {5, "int64"},
                                                    {6, "float16"},
                                                    {7, "float32"},
                                                    {8, "float64"},
                                                    {9, "complex32"},
                                                    {10, "complex64"},
                                                    {11, "complex128"},
                                                    {12, "bool"},
                                                    {13, "bfloat16"},
                                                    {28, "uint16"},
                                                    {29, "float8_e4m3fn"},
                                                    {30, "float8_e5m2"},
                                                    {31, "float8_e4m3fnuz"},
                                                    {32, "float8_e5m2fnuz"},
                                                    {33, "float8_e8m0fnu"},
                                                    {34, "uint32"},
                                                    {35, "uint64"}};
  auto it = names.find(st);
  return it == names.end() ? nullptr : dtype_by_name(it->second);
}

namespace {

// sympy's Symbol('s77', positive=True, integer=True) as the user knows it: s77.
std::string sym_name(std::string_view e) {
  std::string out;
  for (size_t k = 0; k < e.size();) {
    if (e.compare(k, 8, "Symbol('") == 0) {
      const size_t q = e.find('\'', k + 8);
      size_t close = e.find(')', q == std::string_view::npos ? k : q);
      if (q == std::string_view::npos || close == std::string_view::npos) return std::string(e);
      out.append(e.substr(k + 8, q - k - 8));
      k = close + 1;
    } else {
      out += e[k++];
    }
  }
  return out;
}

}  // namespace

std::string symint_text(const nlohmann::json& v) {
  if (!v.is_object()) return "?";
  if (auto i = v.find("as_int"); i != v.end() && i->is_number_integer()) return i->dump();
  if (auto x = v.find("as_expr"); x != v.end() && x->is_object())
    if (auto s = x->find("expr_str"); s != x->end() && s->is_string()) return sym_name(s->get<std::string>());
  return "?";
}

std::optional<int64_t> symint_value(const nlohmann::json& v) {
  if (!v.is_object()) return std::nullopt;
  if (auto i = v.find("as_int"); i != v.end() && i->is_number_integer()) return i->get<int64_t>();
  if (auto x = v.find("as_expr"); x != v.end() && x->is_object())
    if (auto h = x->find("hint"); h != x->end()) {
      if (h->is_number_integer()) return h->get<int64_t>();
      if (h->is_object()) return symint_value(*h);
    }
  return std::nullopt;
}

}  // namespace pt2

namespace {

using Doc = pt2::Doc<nlohmann::ordered_json>;
using J = nlohmann::ordered_json;

// A PayloadMeta's tensor_meta (or a graph TensorMeta) with static sizes, as a Tensor.
Tensor tensor_of(const Doc& d, const J& m, const std::string& ptr, const std::string& name) {
  if (!m.is_object()) d.fail(ptr, "tensor_meta is not an object");
  Tensor t;
  t.name = name;
  const auto dt = m.find("dtype");
  if (dt == m.end() || !dt->is_number_integer()) d.fail(ptr + "/dtype", "no integer dtype");
  t.dtype = pt2::dtype_of(dt->get<int64_t>());
  if (!t.dtype) d.fail(ptr + "/dtype", fmt::format("unknown ScalarType {}", dt->dump()));
  auto ints = [&](const char* key) {
    std::vector<int64_t> out;
    const auto a = m.find(key);
    if (a == m.end() || !a->is_array()) d.fail(ptr + "/" + key, "not an array");
    if (a->size() > pt2::kMaxDims) d.fail(ptr + "/" + key, fmt::format("{} dimensions (at most {})", a->size(), pt2::kMaxDims));
    for (size_t k = 0; k < a->size(); ++k) {
      const J& x = (*a)[k];
      const auto i = x.is_object() ? x.find("as_int") : x.end();
      if (i == x.end() || !i->is_number_integer() || (i->is_number_unsigned() && i->get<uint64_t>() > INT64_MAX) ||
          i->get<int64_t>() < 0)
        d.fail(fmt::format("{}/{}/{}", ptr, key, k), "not a static size >= 0 ({\"as_int\": n})");
      out.push_back(i->get<int64_t>());
    }
    return out;
  };
  t.shape = ints("sizes");
  t.stride = ints("strides");
  if (t.stride.size() != t.shape.size())
    d.fail(ptr + "/strides", fmt::format("{} strides for {} sizes", t.stride.size(), t.shape.size()));
  uint64_t numel = 1;
  for (size_t k = 0; k < t.shape.size(); ++k)
    if (mul_overflows(numel, static_cast<uint64_t>(t.shape[k]), &numel) || numel > (1ull << 58))
      d.fail(fmt::format("{}/sizes/{}", ptr, k), fmt::format("size {} makes the element count overflow", t.shape[k]));
  t.numel = static_cast<int64_t>(numel);
  t.bytes = dtype_bytes(*t.dtype, numel);
  if (auto o = m.find("storage_offset"); o != m.end()) {
    const auto i = o->is_object() ? o->find("as_int") : o->end();
    if (i == o->end() || !i->is_number_integer() || i->get<int64_t>() < 0 ||
        (i->is_number_unsigned() && i->get<uint64_t>() > (1ull << 58)))
      d.fail(ptr + "/storage_offset", "not a static offset >= 0");
    t.offset = i->get<int64_t>();
  }
  if (auto r = m.find("requires_grad"); r != m.end() && r->is_boolean()) t.requires_grad = r->get<bool>();
  if (auto dev = m.find("device"); dev != m.end() && dev->is_object()) {
    const auto ty = dev->find("type");
    if (ty != dev->end() && ty->is_string()) t.device = ty->get<std::string>();
    const auto ix = dev->find("index");
    if (ix != dev->end() && ix->is_number_integer()) t.device = t.device.str() + ":" + ix->dump();
  }
  if (auto l = m.find("layout"); l != m.end() && l->is_number_integer() && l->get<int64_t>() != 7) {
    static const char* kLayouts[] = {"unknown", "sparse_coo", "sparse_csr", "sparse_csc", "sparse_bsr", "sparse_bsc", "mkldnn"};
    const int64_t k = l->get<int64_t>();
    t.layout = Layout::Other;
    t.x.mut().layout_name = k >= 0 && k < 7 ? kLayouts[k] : "unknown";
    t.layout = layout_from_name(t.x->layout_name);
  }
  t.kind_inferred = false;
  return t;
}

// A path_name from a payload config: one file name inside its folder (torch joins it to the folder, so a
// '/' or '..' would reach outside it).
std::string member_of(const Doc& d, const std::string& ptr, const J& meta, const std::string& dir) {
  const auto p = meta.find("path_name");
  if (p == meta.end() || !p->is_string()) d.fail(ptr + "/path_name", "no path_name string");
  const std::string name = p->get<std::string>();
  if (name.empty() || name == "." || name == ".." || name.find_first_of("/\\") != std::string::npos ||
      name.find('\0') != std::string::npos)
    d.fail(ptr + "/path_name", fmt::format("'{}' is not a file name inside {}", name, dir));
  return dir + name;
}

bool flag(const J& meta, const char* key) {
  const auto f = meta.find(key);
  return f != meta.end() && f->is_boolean() && f->get<bool>();
}

// A torch.save zip stored as one member: its tensors and storages, the storages located in the outer
// file (member + local header, as torch.save zip storages) and keyed "<member>:<key>". Reads data.pkl
// only.
Checkpoint read_blob(Checkpoint& ck, const ZipReader& zip, const ZipEntry& e, const std::string& label, const Limits& lim) {
  if (e.method != 0) zip.file().fail(e.central_offset, fmt::format("{} is compressed; .pt2 archives store members", label));
  const ByteView blob = zip.stored(e);
  ZipReader inner(blob, lim);
  if (inner.entries().empty()) blob.fail(0, "torch.save zip has no entries");
  const std::string first(inner.entries().front().name);
  const auto slash = first.find('/');
  if (slash == std::string::npos) blob.fail(0, "torch.save zip entry is not under a folder");
  const std::string pre = first.substr(0, slash + 1);
  const ZipEntry* pe = inner.find(pre + "data.pkl");
  if (!pe) blob.fail(0, fmt::format("torch.save zip has no {}data.pkl", pre));
  const ByteView pkl = inner.stored(*pe);
  if (pkl.size() > lim.pickle_bytes) pkl.fail(0, fmt::format("data.pkl of {} bytes exceeds the limit", pkl.size()));
  Checkpoint part;
  part.path = ck.path;
  part.heap = std::make_shared<Heap>();
  ck.keep_alive.push_back(part.heap);
  Unpickled u = unpickle(pkl, 0, *part.heap, lim);
  const uint64_t base = static_cast<uint64_t>(blob.address() - zip.file().address());
  const std::string dir = pre + "data/";
  TorchInterpreter interp(part, pkl, lim, [&inner, dir, pkl, base](Storage& s, const Value* at) {
    const ZipEntry* se = inner.find(dir + s.key);
    if (!se) pkl.fail(at->offset, fmt::format("storage '{}' has no zip entry {}{}", s.key, dir, s.key));
    if (se->method != 0) pkl.fail(at->offset, fmt::format("storage entry {} is deflated", se->name));
    if (se->uncompressed_size < s.nbytes)
      pkl.fail(at->offset,
               fmt::format("storage '{}' needs {} bytes but {} holds {}", s.key, s.nbytes, se->name, se->uncompressed_size));
    s.member = se->name;
    s.local_header = base + se->local_header_offset;
    s.present = true;
  });
  interp.interpret(u.root);
  for (Storage& s : part.storages) s.key = label + ":" + s.key;
  for (Tensor& t : part.tensors)
    if (!t.storage.empty()) t.storage = label + ":" + t.storage;
  return part;
}

void add_storage(Checkpoint& ck, Storage s, std::unordered_map<std::string, size_t>& index) {
  if (index.count(s.key)) return;
  index.emplace(s.key, ck.storages.size());
  ck.storages.push_back(std::move(s));
}

// What the signature says each state-dict / constant name is.
std::unordered_map<std::string, std::string> target_kinds(const Pt2Model& m) {
  std::unordered_map<std::string, std::string> out;
  for (const Pt2Spec& s : m.inputs)
    if (!s.target.empty()) out.emplace(s.target, s.kind);
  return out;
}

void count_model(Pt2Model& m, const Tensor& t) {
  ++m.tensors;
  m.bytes += t.bytes;
  (t.kind == TensorKind::Buffer ? m.buffers : m.parameters) += static_cast<uint64_t>(t.numel);
}

// The module tree: named modules in first-seen order (call graph, nn_module_stack, tensor owners), laid
// out in pre-order with siblings in that order.
void order_modules(Checkpoint& ck) {
  std::vector<Module> seen = std::move(ck.modules);
  std::unordered_map<std::string, size_t> at;
  for (size_t k = 0; k < seen.size(); ++k) at.emplace(seen[k].name, k);
  auto add = [&](const std::string& name) {
    if (!at.emplace(name, seen.size()).second) return;
    Module m;
    m.name = name;
    seen.push_back(std::move(m));
  };
  add("");
  for (const Tensor& t : ck.tensors)
    for (size_t dot = t.name.find('.'); dot != std::string::npos; dot = t.name.find('.', dot + 1)) add(t.name.substr(0, dot));
  for (size_t k = 0, n = seen.size(); k < n; ++k)  // parents of every module
    for (size_t dot = seen[k].name.find('.'); dot != std::string::npos; dot = seen[k].name.find('.', dot + 1))
      add(seen[k].name.substr(0, dot));
  std::map<std::string, std::vector<size_t>> children;
  for (size_t k = 0; k < seen.size(); ++k) {
    if (seen[k].name.empty()) continue;
    const auto dot = seen[k].name.rfind('.');
    children[dot == std::string::npos ? "" : seen[k].name.substr(0, dot)].push_back(k);
  }
  std::vector<size_t> todo{at[""]};
  while (!todo.empty()) {
    const size_t k = todo.back();
    todo.pop_back();
    ck.modules.push_back(seen[k]);
    auto it = children.find(seen[k].name);
    if (it != children.end()) todo.insert(todo.end(), it->second.rbegin(), it->second.rend());
  }
}

// As testdata/gen_pt2.py names them: ".so", ".cpp" (C/C++/CUDA sources), "kernel" (GPU binaries),
// "object" (ELF objects), "weights" (AOTI's *.weights.o, .bin, .blob), "other" (metadata, flags, linker
// scripts, headers, anything else).
const char* artifact_kind(std::string_view p) {
  const std::string_view base = p.substr(p.rfind('/') + 1);
  auto ends = [&](std::string_view s) {
    return base.size() >= s.size() && base.compare(base.size() - s.size(), s.size(), s) == 0;
  };
  if (ends(".json") || ends(".txt") || ends(".ld")) return "other";
  if (ends(".so")) return ".so";
  if (ends(".cpp") || ends(".c") || ends(".cc") || ends(".cxx") || ends(".cu")) return ".cpp";
  if (ends(".cubin") || ends(".hsaco") || ends(".spv") || ends(".ptx") || ends(".fatbin") ||
      base.find("kernel") != std::string_view::npos)
    return "kernel";
  if (ends(".o")) return base.find(".weights.") != std::string_view::npos ? "weights" : "object";
  if (ends(".bin") || ends(".blob") || p.find("/data/weights/") != std::string_view::npos ||
      p.find("/data/constants/") != std::string_view::npos)
    return "weights";
  return "other";
}

void sample_inputs(Checkpoint& ck, const ZipReader& zip, const ZipEntry& e, Pt2Model& m, const Limits& lim) {
  m.sample_inputs = std::string(e.name);
  // Only listed: an archive whose sample inputs ckpt cannot read still summarizes (check's scan reports them).
  try {
    Checkpoint part = read_blob(ck, zip, e, m.sample_inputs, lim);
    for (const Tensor& t : part.tensors)
      m.sample_tensors.push_back({t.name, t.dtype ? std::string(t.dtype->name) : "?", t.shape});
  } catch (const InputError&) {}
}

// A model's constants (data/constants/NAME_constants_config.json, member `ce`): their members, kinds
// (from the graph's signature: `kinds`) and, where saved, dtype, shape and bytes.
void read_constants(const Checkpoint& ck, const ZipReader& zip, const ZipEntry& ce, const std::string& pre,
                    const std::unordered_map<std::string, std::string>& kinds, Pt2Model& m, const Limits& lim) {
  const Doc c = pt2::parse_doc<nlohmann::ordered_json>(zip, ce, ck.path, lim);
  const auto cfg = c.j.is_object() ? c.j.find("config") : c.j.end();
  if (cfg == c.j.end() || !cfg->is_object()) c.fail("/config", "no config object");
  for (auto it = cfg->begin(); it != cfg->end(); ++it) {
    const std::string ptr = "/config/" + it.key();
    if (!it->is_object()) c.fail(ptr, "not a PayloadMeta object");
    if (m.constants.size() >= lim.tensors) c.fail(ptr, fmt::format("more than {} constants", lim.tensors));
    Pt2Constant k;
    k.name = it.key();
    k.path = member_of(c, ptr, *it, pre + "data/constants/");
    if (!zip.find(k.path)) c.fail(ptr + "/path_name", fmt::format("member {} is missing from the archive", k.path));
    k.path = k.path.substr(pre.size());
    auto kind = kinds.find(k.name);
    k.kind = kind != kinds.end() ? kind->second : "constant";
    if (const auto tm = it->find("tensor_meta"); tm != it->end() && !tm->is_null()) {
      const Tensor t = tensor_of(c, *tm, ptr + "/tensor_meta", k.name);
      k.dtype = t.dtype->name;
      for (int64_t x : t.shape) k.shape.push_back(std::to_string(x));
      k.bytes = t.bytes;
    }
    m.constants.push_back(std::move(k));
  }

}

// torch >= 2.7: models/<name>.json with its payload configs.
void read_archive(Checkpoint& ck, const ZipReader& zip, const std::string& pre, const Limits& lim) {
  Pt2Info& info = ck.pt2;
  info.layout = "pt2-archive";
  std::set<std::string> names;
  for (const ZipEntry& e : zip.entries()) {
    std::string_view n = e.name;
    if (n.substr(0, pre.size()) != pre) continue;
    n.remove_prefix(pre.size());
    if (n.substr(0, 7) == "models/" && n.size() > 12 && n.substr(n.size() - 5) == ".json" &&
        n.substr(7).find('/') == std::string_view::npos)
      names.insert(std::string(n.substr(7, n.size() - 12)));
    else if (n.substr(0, 17) == "data/aotinductor/") info.aoti.push_back({std::string(n), artifact_kind(n), e.uncompressed_size});
  }
  if (names.empty() && info.aoti.empty()) zip.file().fail(0, fmt::format("pt2 archive has no {}models/*.json", pre));
  info.main_model = names.count("model") ? "model" : names.empty() ? "" : *names.begin();
  std::unordered_map<std::string, size_t> storage_index;
  for (const std::string& name : names) {
    const bool main = name == info.main_model;
    Pt2Model m;
    m.name = name;
    const auto d = pt2::parse_doc<nlohmann::json>(zip, *zip.find(pre + "models/" + name + ".json"), ck.path, lim);
    m.member = d.member;
    std::vector<Module> modules;
    pt2::read_graph(d, m, main ? &modules : nullptr, lim);
    if (main) ck.modules = std::move(modules);
    const auto kinds = target_kinds(m);

    if (const ZipEntry* we = zip.find(pre + "data/weights/" + name + "_weights_config.json")) {
      const Doc w = pt2::parse_doc<nlohmann::ordered_json>(zip, *we, ck.path, lim);
      const auto cfg = w.j.is_object() ? w.j.find("config") : w.j.end();
      if (cfg == w.j.end() || !cfg->is_object()) w.fail("/config", "no config object");
      std::vector<Tensor> tensors;
      for (auto it = cfg->begin(); it != cfg->end(); ++it) {
        const std::string ptr = "/config/" + it.key();
        const J& meta = it.value();
        if (!meta.is_object()) w.fail(ptr, "not a PayloadMeta object");
        if (ck.tensors.size() + tensors.size() >= lim.tensors) w.fail(ptr, fmt::format("more than {} tensors", lim.tensors));
        const std::string member = member_of(w, ptr, meta, pre + "data/weights/");
        const ZipEntry* e = zip.find(member);
        if (!e) w.fail(ptr + "/path_name", fmt::format("member {} is missing from the archive", member));
        const auto tm = meta.find("tensor_meta");
        if (tm == meta.end()) w.fail(ptr + "/tensor_meta", "missing");
        Tensor t = tensor_of(w, *tm, ptr + "/tensor_meta", it.key());
        auto k = kinds.find(t.name);
        const std::string kind = k != kinds.end() ? k->second : flag(meta, "is_param") ? "parameter" : "buffer";
        t.kind = kind == "parameter" ? TensorKind::Parameter : TensorKind::Buffer;
        t.is_parameter_object = t.kind == TensorKind::Parameter;
        if (flag(meta, "use_pickle")) {
          // A tensor subclass saved with torch.save: its storage is inside that blob.
          Checkpoint part = read_blob(ck, zip, *e, member, lim);
          if (part.tensors.size() == 1) t.x.mut().subclass = part.tensors[0].x->subclass;
          // A wrapper subclass (TwoTensor, ...) has no storage of its own: summary only, no load.
          if (part.tensors.size() == 1 && !part.tensors[0].storage.empty()) {
            t.storage = part.tensors[0].storage;
            t.offset = part.tensors[0].offset;
            t.stride = part.tensors[0].stride;
            t.x.mut().subclass = part.tensors[0].x->subclass;
            for (Storage& s : part.storages) s.in_model = main, add_storage(ck, std::move(s), storage_index);
          }
        } else {
          if (e->method != 0) w.fail(ptr + "/path_name", fmt::format("member {} is compressed", member));
          Storage s;
          s.key = member.substr(pre.size());
          s.dtype = t.dtype;
          s.nbytes = e->uncompressed_size;
          if (s.nbytes % t.dtype->itemsize != 0)
            w.fail(ptr,
                   fmt::format("member {} holds {} bytes, not a whole number of {} elements", member, s.nbytes, t.dtype->name));
          s.numel = s.nbytes / t.dtype->itemsize;
          s.device = t.device;
          s.member = e->name;
          s.local_header = e->local_header_offset;
          s.present = true;
          s.in_model = main;
          t.storage = s.key;
          auto known = storage_index.find(s.key);
          const Storage& st = known == storage_index.end() ? s : ck.storages[known->second];
          // Every element of the view inside the member's bytes (torch's set_ would refuse otherwise).
          uint64_t extent = static_cast<uint64_t>(t.offset) + 1, span;
          bool bad = false;
          for (size_t k2 = 0; k2 < t.shape.size() && !bad; ++k2)
            if (t.shape[k2] > 0)
              bad = mul_overflows(static_cast<uint64_t>(t.shape[k2] - 1), static_cast<uint64_t>(t.stride[k2]), &span) ||
                    add_overflows(extent, span, &extent);
          uint64_t need = 0;
          if (t.numel > 0 && (bad || mul_overflows(extent, t.dtype->itemsize, &need) || need > st.nbytes))
            w.fail(ptr + "/tensor_meta/sizes", fmt::format("'{}' (offset {}, shape {}) needs more than the {} bytes of member {}",
                                                           t.name, t.offset, fmt::join(t.shape, "x"), st.nbytes, member));
          add_storage(ck, std::move(s), storage_index);
        }
        tensors.push_back(std::move(t));
      }
      for (Tensor& t : tensors) {
        count_model(m, t);
        if (main) ck.tensors.push_back(std::move(t));
      }
    }

    if (const ZipEntry* ce = zip.find(pre + "data/constants/" + name + "_constants_config.json"))
      read_constants(ck, zip, *ce, pre, kinds, m, lim);
    if (const ZipEntry* se = zip.find(pre + "data/sample_inputs/" + name + ".pt")) sample_inputs(ck, zip, *se, m, lim);
    info.models.push_back(std::move(m));
  }
}

// torch 2.6: serialized_exported_program.json and three torch.save blobs, no folder.
void read_export_zip(Checkpoint& ck, const ZipReader& zip, const Limits& lim) {
  Pt2Info& info = ck.pt2;
  info.layout = "export-zip";
  info.main_model = "model";
  Pt2Model m;
  m.name = "model";
  const auto d = pt2::parse_doc<nlohmann::json>(zip, *zip.find("serialized_exported_program.json"), ck.path, lim);
  m.member = d.member;
  pt2::read_graph(d, m, &ck.modules, lim);
  const auto kinds = target_kinds(m);
  std::unordered_map<std::string, size_t> storage_index;
  if (const ZipEntry* e = zip.find("serialized_state_dict.pt")) {
    Checkpoint part = read_blob(ck, zip, *e, "serialized_state_dict.pt", lim);
    for (Storage& s : part.storages) add_storage(ck, std::move(s), storage_index);
    for (Tensor& t : part.tensors) {
      auto k = kinds.find(t.name);
      if (k != kinds.end()) {
        t.kind = k->second == "parameter" ? TensorKind::Parameter : TensorKind::Buffer;
        t.is_parameter_object = t.kind == TensorKind::Parameter;
        t.kind_inferred = false;
      } else {
        t.kind = t.is_parameter_object ? TensorKind::Parameter : TensorKind::Buffer;  // a Parameter object or not
        t.kind_inferred = false;
      }
      count_model(m, t);
      ck.tensors.push_back(std::move(t));
    }
  } else {
    zip.file().fail(0, "torch.export archive has no serialized_state_dict.pt");
  }
  if (const ZipEntry* e = zip.find("serialized_constants.pt")) {
    Checkpoint part = read_blob(ck, zip, *e, "serialized_constants.pt", lim);
    for (Storage& s : part.storages) s.in_model = false, add_storage(ck, std::move(s), storage_index);
    for (const Tensor& t : part.tensors) {
      Pt2Constant k;
      k.name = t.name;
      auto kind = kinds.find(t.name);
      k.kind = kind != kinds.end() ? kind->second : "constant";
      k.dtype = t.dtype ? std::string(t.dtype->name) : "?";
      for (int64_t x : t.shape) k.shape.push_back(std::to_string(x));
      k.bytes = t.bytes;
      m.constants.push_back(std::move(k));
    }
    // Custom objects are no tensors: the signature names them.
    for (const Pt2Spec& s : m.inputs)
      if (s.kind == "custom_obj") m.constants.push_back({s.target, s.kind, "", {}, 0, ""});
  }
  if (const ZipEntry* e = zip.find("serialized_example_inputs.pt")) sample_inputs(ck, zip, *e, m, lim);
  info.models.push_back(std::move(m));
}

}  // namespace

bool is_pt2_archive(const ZipReader& zip, Pt2Layout* layout) {
  if (zip.find("serialized_exported_program.json")) {
    *layout = {true, ""};
    return true;
  }
  if (zip.find("archive_format")) {  // torch 2.6's AOTInductor packages: the archive layout without a folder
    *layout = {false, ""};
    return true;
  }
  if (zip.entries().empty()) return false;
  const std::string first(zip.entries().front().name);
  const auto slash = first.find('/');
  if (slash == std::string::npos || !zip.find(first.substr(0, slash + 1) + "archive_format")) return false;
  *layout = {false, first.substr(0, slash)};
  return true;
}

void read_pt2(Checkpoint& ck, const ZipReader& zip, const Pt2Layout& layout, const Limits& lim) {
  const std::string& prefix = layout.prefix;
  ck.format = Format::Pt2;
  ck.container = Container::Zip;
  ck.content = Content::Module;
  ck.prefix = prefix;
  ck.split_inferred = false;
  const std::string pre = prefix.empty() ? "" : prefix + "/";
  for (const char* rec : {"archive_format", "archive_version", "byteorder", "version", ".data/version"})
    if (const ZipEntry* e = zip.find(pre + rec); e && e->method == 0 && e->uncompressed_size <= 64) {
      std::string v(zip.stored(*e).str(0, e->uncompressed_size));
      while (!v.empty() && (v.back() == '\n' || v.back() == '\r' || v.back() == ' ')) v.pop_back();
      ck.records.emplace_back(rec, v);
      if (std::string_view(rec) == "archive_format") ck.pt2.archive_format = v;
      if (std::string_view(rec) == "archive_version") ck.pt2.archive_version = v;
    }
  if (layout.export_zip) read_export_zip(ck, zip, lim);
  else read_archive(ck, zip, pre, lim);
  order_modules(ck);
}

}  // namespace ckpt
