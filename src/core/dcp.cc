#include "core/dcp.h"

#include <fmt/format.h>

#include <map>

#include "core/storage.h"
#include "core/torch_pickle.h"
#include "core/vfs.h"

namespace ckpt {

bool is_dcp_dir(const std::string& path) {
  return vfs::is_dir(path) && vfs::is_file(vfs::join(path, ".metadata"));
}

namespace {

const Value* field(const Value* obj, std::string_view name) {
  const Value* st = obj ? obj->state() : nullptr;
  return st && st->kind == PKind::Dict ? st->get(name) : nullptr;
}

std::vector<int64_t> ints(const Value* v) {
  std::vector<int64_t> out;
  if (v && v->kind == PKind::Object && v->qualified() == "torch.Size" && v->args() && !v->args()->kids().empty())
    v = v->args()->kids()[0];
  if (!v || (v->kind != PKind::Tuple && v->kind != PKind::List)) return out;
  for (const Value* e : v->kids())
    if (e->is_int()) out.push_back(e->i);
  return out;
}

// Chunks by (fqn, chunk offsets).
using Regions = std::map<std::pair<std::string, std::vector<int64_t>>, Chunk>;

// storage_data: each chunk's region of a .distcp file (of `sizes`, the folder's files), each file mapped
// once (no byte read until a load asks).
Regions read_regions(Checkpoint& ck, const Value* root, const ByteView& v, const std::string& dir,
                     const std::map<std::string, uint64_t>& sizes) {
  Regions regions;
  std::map<std::string, const MappedFile*> mapped;
  if (const Value* sd = field(root, "storage_data"); sd && sd->kind == PKind::Dict) {
    for (size_t k = 0; k + 1 < sd->kids().size(); k += 2) {
      const Value* idx = sd->kids()[k];
      const Value* info = sd->kids()[k + 1];
      const Value* fqn = field(idx, "fqn");
      const Value* rel = field(info, "relative_path");
      const Value* off = field(info, "offset");
      const Value* len = field(info, "length");
      if (!fqn || !fqn->is_str() || !rel || !rel->is_str() || !off || !off->is_int() || !len || !len->is_int() || off->i < 0 ||
          len->i < 0)
        v.fail(info ? info->offset : 0, "storage_data entry is not MetadataIndex -> _StorageInfo(relative_path, offset, length)");
      const std::string file(rel->str());
      if (file.find('/') != std::string::npos || file == ".." || file == ".")
        v.fail(rel->offset, fmt::format("storage file '{}' is not a file in the checkpoint directory", file));
      auto it = sizes.find(file);
      if (it == sizes.end()) v.fail(rel->offset, fmt::format("storage file '{}' is missing", file));
      uint64_t end;
      if (add_overflows(static_cast<uint64_t>(off->i), static_cast<uint64_t>(len->i), &end) || end > it->second)
        v.fail(info->offset, fmt::format("region [{}, +{}) of '{}' lies outside its {} bytes", off->i, len->i, file, it->second));
      auto [mf, fresh] = mapped.emplace(file, nullptr);
      if (fresh) {
        auto f = vfs::open(vfs::join(dir, file));
        mf->second = f.get();
        ck.keep_alive.push_back(f);
        ck.dcp.data_files.push_back(file);
      }
      Chunk c;
      c.offsets = ints(field(idx, "offset"));
      c.file = mf->second;
      c.offset = static_cast<uint64_t>(off->i);
      c.length = static_cast<uint64_t>(len->i);
      regions[{std::string(fqn->str()), c.offsets}] = std::move(c);
    }
  }

  return regions;
}

// One entry of state_dict_metadata: its tensor and storage, every chunk inside the tensor and with its region.
void add_entry(Checkpoint& ck, const std::string& fqn, const Value* m, const Regions& regions, const ByteView& v, const Limits& limits) {
  const std::string cls = m->qualified();
  if (cls.size() >= 20 && cls.compare(cls.size() - 20, 20, "BytesStorageMetadata") == 0) {
    ck.dcp.bytes_entries.push_back(fqn);
    return;
  }
  const Value* props = field(m, "properties");
  const Value* pst = props ? props->state() : nullptr;
  const Value* dt = pst && pst->kind == PKind::Tuple && !pst->kids().empty() ? pst->kids()[0] : nullptr;
  if (!dt && props) dt = field(props, "dtype");
  Tensor t;
  t.name = fqn;
  t.dtype = dt && dt->kind == PKind::Global ? dtype_by_name(dt->name()) : nullptr;
  if (!t.dtype) v.fail(m->offset, fmt::format("tensor '{}' has no known dtype in its TensorProperties", fqn));
  if (pst && pst->kind == PKind::Tuple && pst->kids().size() > 2 && pst->kids()[2]->kind == PKind::Bool)
    t.requires_grad = pst->kids()[2]->b;
  t.shape = ints(field(m, "size"));
  t.stride = contiguous_strides(t.shape);
  uint64_t numel = 1;
  for (size_t d = t.shape.size(); d-- > 0;) {
    if (t.shape[d] < 0 || mul_overflows(numel, static_cast<uint64_t>(t.shape[d]), &numel) || numel > (1ull << 58))
      v.fail(m->offset, fmt::format("tensor '{}' has a bad size", fqn));
  }
  t.numel = static_cast<int64_t>(numel);
  t.bytes = dtype_bytes(*t.dtype, numel);
  t.storage = fqn;
  t.identity = m;
  // Every chunk must lie inside the tensor and have its region.
  std::vector<Chunk> pieces;
  bool all_found = true;
  if (const Value* chunks = field(m, "chunks"); chunks && chunks->kind == PKind::List)
    for (const Value* c : chunks->kids()) {
      auto o = ints(field(c, "offsets")), s = ints(field(c, "sizes"));
      if (o.size() != t.shape.size() || s.size() != t.shape.size())
        v.fail(c->offset, fmt::format("chunk of '{}' has {} offsets for {} dimensions", fqn, o.size(), t.shape.size()));
      for (size_t d = 0; d < o.size(); ++d)
        if (o[d] < 0 || s[d] < 0 || o[d] + s[d] > t.shape[d])
          v.fail(c->offset, fmt::format("chunk of '{}' reaches outside its size", fqn));
      auto r = regions.find({fqn, o});
      if (r == regions.end()) {
        all_found = false;
        continue;
      }
      Chunk piece = r->second;
      piece.sizes = s;
      pieces.push_back(std::move(piece));
    }
  if (ck.tensors.size() >= limits.tensors) v.fail(m->offset, fmt::format("more than {} tensors", limits.tensors));
  Storage s;
  s.key = t.storage;  // one copy of the key between them
  s.dtype = t.dtype;
  s.numel = numel;
  s.nbytes = t.bytes;
  s.device = "cpu";
  s.present = all_found && !pieces.empty();
  s.dcp.mut().chunks = std::move(pieces);
  s.dcp.mut().shape = t.shape;
  s.in_model = true;
  ck.storages.push_back(std::move(s));
  ck.tensors.push_back(std::move(t));
}

}  // namespace

void read_dcp(Checkpoint& ck, const Input& in, const Limits& limits, Checkpoint (*read_blob)(std::shared_ptr<MappedFile>, const Limits&)) {
  const std::string& root = in.path;
  auto meta = vfs::open(vfs::join(root, ".metadata"));
  ck.file = meta;
  ck.path = in.path;
  ck.format = Format::Dcp;
  ck.dcp.read_blob = read_blob;
  ck.container = Container::Dcp;
  ck.content = Content::StateDict;
  ck.heap = std::make_shared<Heap>();
  // `check` scans this pickle only: the regions are torch.save zips of single tensors.
  ck.scan_files.push_back({vfs::join(root, ".metadata"), ".metadata"});
  const ByteView v = meta->view().as_member(".metadata");
  Unpickled u = unpickle(v, 0, *ck.heap, limits);
  ck.pickle_protocol = u.protocol;
  ck.globals = std::move(u.globals);
  const Value* md = field(u.root, "state_dict_metadata");
  if (!md || md->kind != PKind::Dict) v.fail(0, "Metadata has no state_dict_metadata dict");

  // Files and their sizes, for the region checks.
  std::map<std::string, uint64_t> sizes;
  for (const vfs::Entry& e : vfs::list(root))
    if (!e.dir) sizes[e.name] = e.size;
  ck.file_size = 0;
  for (const auto& [name, size] : sizes) ck.file_size += size;

  const Regions regions = read_regions(ck, u.root, v, root, sizes);
  for (size_t k = 0; k + 1 < md->kids().size(); k += 2)
    if (md->kids()[k]->is_str()) add_entry(ck, std::string(md->kids()[k]->str()), md->kids()[k + 1], regions, v, limits);
  infer_kinds(ck.tensors);
  ck.dcp.files.assign(sizes.begin(), sizes.end());
}

}  // namespace ckpt
