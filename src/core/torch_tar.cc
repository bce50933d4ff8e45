#include "core/torch_tar.h"

#include <fmt/format.h>
#include <algorithm>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include "core/dcp.h"
#include "core/pt2.h"
#include "core/safetensors.h"
#include "core/hf_config.h"
#include "core/lightning_details.h"
#include "core/sharded.h"
#include "core/tar.h"
#include "core/torch_pickle.h"
#include "core/torchscript.h"
#include "core/vfs.h"
#include "core/zip.h"

namespace ckpt {
namespace {

// ---------------------------------------------------------------------------------------------------
// tar (torch <= 0.1.9), read as torch/serialization.py's legacy_load reads it (tarfile's getmember: the
// last member of a name):
//   sys_info  pickle({protocol_version, little_endian, type_sizes}): not read by torch
//   storages  pickle(n), then n x [pickle((key, location, StorageType)), int64 element count, the bytes],
//             then pickle([(view_key, root_key, offset, numel), ...]): views are slices of a root
//   tensors   pickle(n), then n x [pickle((key, storage_key, TensorType)), int32 ndim, 4 unused bytes,
//             ndim x int64 sizes, ndim x int64 strides, int64 storage offset]
//   pickle    the object: a persistent id str(key) is deserialized_objects[int(key)] (a tensor, or a
//             storage), a tuple (class, source_file, source) is the class
// The tensors become the _rebuild_tensor_v2 calls a zip archive would hold, and TorchInterpreter takes it
// from there.
namespace tar {

struct Stor {  // a storage: a root, or a view (slice) of one
  std::string root;  // the root's key, as ck.storages names it
  const Value* cls = nullptr;  // GLOBAL torch.<X>Storage
  const DType* dtype = nullptr;
  std::string location;
  uint64_t root_numel = 0;  // elements of the root
  uint64_t byte_offset = 0, byte_len = 0;  // this storage within the root
  uint64_t file_offset = 0;  // roots: where the bytes are
};

struct Tens {
  const Stor* storage = nullptr;
  std::vector<int64_t> size, stride;
  int64_t offset = 0;  // in elements of the root storage
  uint64_t at = 0;  // offset of its record in the tensors member (for errors)
};

// A Python dict key, typed ("i5", "s5", "b5"): deserialized_objects is keyed by what the pickles hold.
std::string key_of(const Value* k, const ByteView& v, uint64_t at, const char* what) {
  if (k && k->is_str()) return "s" + std::string(k->str());
  if (k && k->kind == PKind::Bytes) return "b" + std::string(k->str());
  if (auto t = int_value_text(k, &v)) return "i" + *t;
  v.fail(at, fmt::format("{} is not an int or a string", what));
}

// deserialized_objects[int(saved_id)]: int() of a string or bytes is base 10.
std::optional<std::string> pid_key(const Value* pid, const ByteView& v) {
  if (pid && (pid->is_str() || pid->kind == PKind::Bytes)) {
    auto t = python_int_text(pid->str(), 10);
    return t ? std::optional<std::string>("i" + *t) : std::nullopt;
  }
  if (auto t = int_value_text(pid, &v)) return "i" + *t;
  return std::nullopt;
}

const Value* items_of(const Value* v, size_t n) {
  return v && (v->kind == PKind::Tuple || v->kind == PKind::List) && v->kids().size() == n ? v : nullptr;
}

uint64_t count_of(const Unpickled& u, const ByteView& v, const Limits& lim, const char* what) {
  const auto t = int_value_text(u.root, &v);
  if (!t || (*t)[0] == '-' || t->size() > 12 || std::stoull(*t) > lim.tensors)
    v.fail(0, fmt::format("{} count is not an int from 0 to {}", what, lim.tensors));
  return std::stoull(*t);
}

// The records of the storages and tensors members: the count pickled first, then that many 3-tuple
// records (`not_tuple` is the error for anything else), each followed by raw bytes that
// `read(at, items, end)` reads from the record's end, returning where the next record starts. Returns
// where the last one ended.
template <class Read>
uint64_t read_records(const ByteView& v, Heap& heap, const Limits& lim, const char* what, const char* not_tuple,
                      Read&& read) {
  const Unpickled n = unpickle(v, 0, heap, lim);
  uint64_t pos = n.end;
  for (uint64_t k = 0, count = count_of(n, v, lim, what); k < count; ++k) {
    const uint64_t at = pos;
    const Unpickled a = unpickle(v, pos, heap, lim);
    const Value* t = items_of(a.root, 3);
    if (!t) v.fail(at, not_tuple);
    pos = read(at, t, a.end);
  }
  return pos;
}

std::string display_key(const std::string& k) { return k.substr(1); }

Value* make_int(Heap& h, int64_t x, uint64_t at) {
  Value* v = h.make(PKind::Int, at);
  v->i = x;
  return v;
}

Value* make_str(Heap& h, std::string s, uint64_t at) {
  Value* v = h.make(PKind::Str, at);
  v->set_str(h.keep(std::move(s)));
  return v;
}

Value* tuple_value(Heap& h, const std::vector<Value*>& items, uint64_t at) {
  Value* v = h.make(PKind::Tuple, at);
  v->mut_kids().assign(h, items);
  return v;
}

// Turns the persistent-id node into torch._utils._rebuild_tensor_v2(PersId(('storage', cls, root key,
// location, root numel)), offset, size, stride, False, {}): what a zip archive holds for the same tensor.
void become_tensor(Value* node, const Tens& t, Heap& h) {
  const uint64_t at = node->offset;
  const Stor& s = *t.storage;
  Value* fn = h.make(PKind::Global, at);
  fn->set_str("torch._utils");
  h.ext(fn)->name = "_rebuild_tensor_v2";
  Value* pid = tuple_value(h,
                           {make_str(h, "storage", at), const_cast<Value*>(s.cls), make_str(h, display_key(s.root), at),
                            make_str(h, s.location, at), make_int(h, static_cast<int64_t>(s.root_numel), at)},
                           at);
  Value* pers = h.make(PKind::PersId, at);
  h.ext(pers)->args = pid;
  std::vector<Value*> size, stride;
  for (int64_t x : t.size) size.push_back(make_int(h, x, at));
  for (int64_t x : t.stride) stride.push_back(make_int(h, x, at));
  Value* no = h.make(PKind::Bool, at);
  Value* hooks = h.make(PKind::Dict, at);  // backward_hooks: torch writes an empty OrderedDict
  Value* args =
      tuple_value(h, {pers, make_int(h, t.offset, at), tuple_value(h, size, at), tuple_value(h, stride, at), no, hooks}, at);
  node->kind = PKind::Object;
  node->how = ObjHow::Reduce;
  ObjExt* ext = h.ext(node);
  ext->callable = fn;
  ext->args = args;
}

// Every persistent id in the object graph, resolved as legacy_load's persistent_load does.
void resolve_pids(Value* root, Heap& h, const std::unordered_map<std::string, Tens>& tensors,
                  const std::unordered_map<std::string, Stor>& storages, const ByteView& pv, const Limits& lim) {
  std::unordered_set<const Value*> seen;
  std::vector<Value*> todo{root};
  while (!todo.empty()) {
    Value* v = todo.back();
    todo.pop_back();
    if (!v || !seen.insert(v).second) continue;
    if (seen.size() > lim.walk_nodes) pv.fail(0, fmt::format("object graph has more than {} nodes to visit", lim.walk_nodes));
    if (v->kind == PKind::PersId) {
      const Value* pid = v->args();
      if (pid && pid->kind == PKind::Tuple && !pid->kids().empty()) {  // (class, source_file, source): the class
        const uint64_t at = v->offset;
        *v = *pid->kids()[0];
        v->offset = at;
        todo.push_back(v->callable());
        todo.push_back(v->args());
        continue;
      }
      const auto key = pid_key(pid, pv);
      if (!key) pv.fail(v->offset, "persistent id is not a number or a tuple");
      if (auto it = tensors.find(*key); it != tensors.end()) {
        become_tensor(v, it->second, h);
        continue;
      }
      if (storages.count(*key)) continue;  // a storage saved as such: no tensor
      pv.fail(v->offset,
              fmt::format("persistent id {} names no tensor or storage of the tensors / storages members", display_key(*key)));
    }
    for (Value* c : v->kids()) todo.push_back(c);
    if (v->ext) {
      todo.push_back(v->ext->callable);
      todo.push_back(v->ext->args);
      todo.push_back(v->ext->kwargs);
      todo.push_back(v->ext->state);
      for (Value* c : v->ext->dict) todo.push_back(c);
    }
  }
}

}  // namespace tar

// The storages member: the roots with their bytes (`file`: the whole tar, for their offsets), then the views.
std::unordered_map<std::string, tar::Stor> read_storages(const ByteView& sv, const ByteView& file, Heap& heap, const Limits& lim) {
  using namespace tar;
  std::unordered_map<std::string, Stor> storages;
  const char* error = "storage record is not a (key, location, storage type) tuple";
  const uint64_t pos = read_records(sv, heap, lim, "storage", error, [&](uint64_t at, const Value* t, uint64_t end) {
    Stor s;
    s.root = key_of(t->kids()[0], sv, at, "storage key");
    s.cls = t->kids()[2];
    if (s.cls->kind != PKind::Global) sv.fail(at, "storage type is not a global");
    s.dtype = dtype_by_storage_class(s.cls->str() == "torch.cuda" ? "cuda." + std::string(s.cls->name())
                                                              : std::string(s.cls->name()));
    if (!s.dtype) sv.fail(at, fmt::format("unknown storage type {}", s.cls->qualified()));
    if (!t->kids()[1]->is_str()) sv.fail(at, "storage location is not a string");
    s.location = std::string(t->kids()[1]->str());
    const int64_t numel = sv.le<int64_t>(end);
    uint64_t nbytes;
    if (numel < 0 || mul_overflows(static_cast<uint64_t>(numel), s.dtype->itemsize, &nbytes))
      sv.fail(end, fmt::format("storage {} has a bad element count {}", display_key(s.root), numel));
    sv.sub(end + 8, nbytes, "storage data");
    s.root_numel = static_cast<uint64_t>(numel);
    s.byte_len = nbytes;
    s.file_offset = (sv.address() - file.address()) + end + 8;
    storages[s.root] = s;
    return end + 8 + nbytes;
  });
  Unpickled views = unpickle(sv, pos, heap, lim);
  if (views.root->kind != PKind::List && views.root->kind != PKind::Tuple) sv.fail(pos, "storage view list is not a list");
  for (const Value* vw : views.root->kids()) {
    const Value* t = items_of(vw, 4);
    if (!t) sv.fail(vw->offset, "storage view is not a (key, root key, offset, numel) tuple");
    auto root = storages.find(key_of(t->kids()[1], sv, vw->offset, "storage view root"));
    if (root == storages.end()) sv.fail(vw->offset, "storage view names a root storage the member does not have");
    const Value* off = t->kids()[2];
    const Value* num = t->kids()[3];
    if (!off->is_int() || !num->is_int() || off->i < 0 || num->i < 0)
      sv.fail(vw->offset, "storage view offset / numel is not an int >= 0");
    Stor s = root->second;  // a slice of a slice is a slice of the root; Python clamps it to the root's end
    const uint64_t item = s.dtype->itemsize;
    const uint64_t start = std::min<uint64_t>(static_cast<uint64_t>(off->i) * item, s.byte_len);
    const uint64_t stop = std::min<uint64_t>(static_cast<uint64_t>(off->i + num->i) * item, s.byte_len);
    s.byte_offset += start;
    s.byte_len = stop > start ? stop - start : 0;
    storages[key_of(t->kids()[0], sv, vw->offset, "storage view key")] = s;
  }

  return storages;
}

// The tensors member: (key, storage, type) and the sizes / strides / offset after each, every element
// inside its storage.
std::unordered_map<std::string, tar::Tens> read_tensors(const ByteView& tv, std::unordered_map<std::string, tar::Stor>& storages, Heap& heap,
                                                   const Limits& lim) {
  using namespace tar;
  std::unordered_map<std::string, Tens> tensors;
  const char* error = "tensor record is not a (key, storage key, tensor type) tuple";
  read_records(tv, heap, lim, "tensor", error, [&](uint64_t at, const Value* t, uint64_t end) {
    const std::string key = key_of(t->kids()[0], tv, at, "tensor key");
    auto st = storages.find(key_of(t->kids()[1], tv, at, "tensor storage key"));
    if (st == storages.end())
      tv.fail(at, fmt::format("tensor {} names a storage the storages member does not have", display_key(key)));
    Tens x;
    x.storage = &st->second;
    x.at = at;
    uint64_t pos = end;
    const int32_t ndim = tv.le<int32_t>(pos);
    if (ndim < 0 || ndim > 1024) tv.fail(pos, fmt::format("tensor {} has {} dimensions", display_key(key), ndim));
    pos += 8;
    for (int32_t d = 0; d < ndim; ++d, pos += 8) x.size.push_back(tv.le<int64_t>(pos));
    for (int32_t d = 0; d < ndim; ++d, pos += 8) x.stride.push_back(tv.le<int64_t>(pos));
    const int64_t offset = tv.le<int64_t>(pos);
    pos += 8;
    // Tensor.set_(storage, offset, size, stride): sizes, strides and offset >= 0, every element inside the
    // storage (the view's slice, not the whole root).
    const uint64_t item = x.storage->dtype->itemsize;
    uint64_t extent = static_cast<uint64_t>(offset) + 1, numel = 1, span;
    bool bad = offset < 0;
    for (int32_t d = 0; d < ndim && !bad; ++d) {
      bad = x.size[d] < 0 || x.stride[d] < 0 || mul_overflows(numel, static_cast<uint64_t>(x.size[d]), &numel);
      if (!bad && x.size[d] > 0)
        bad = mul_overflows(static_cast<uint64_t>(x.size[d] - 1), static_cast<uint64_t>(x.stride[d]), &span) ||
              add_overflows(extent, span, &extent);
    }
    uint64_t need = 0;
    if (!bad && numel > 0) bad = mul_overflows(extent, item, &need) || need > x.storage->byte_len;
    if (bad)
      tv.fail(at, fmt::format("tensor {} (offset {}) does not fit its storage {} of {} bytes", display_key(key), offset,
                              display_key(x.storage->root), x.storage->byte_len));
    x.offset = offset + static_cast<int64_t>(x.storage->byte_offset / item);
    tensors[key] = std::move(x);
    return pos;
  });

  return tensors;
}

}  // namespace

void read_torch_tar(Checkpoint& ck, const Input& in, const Limits& lim) {
  using namespace tar;
  const ByteView file = in.file->view();
  const std::vector<TarMember> members = tar_members(file, lim);
  auto member = [&](const char* name) {
    const TarMember* m = find_tar_member(members, name);
    if (!m) file.fail(0, fmt::format("tar checkpoint (torch <= 0.1.9) has no '{}' member", name));
    if (!m->is_file())
      file.fail(m->header,
                fmt::format("tar checkpoint member '{}' is not a file (type '{}')", name, m->type == '\0' ? '0' : m->type));
    return tar_member_data(file, *m);
  };
  ck.container = Container::Legacy;
  ck.format = Format::TorchLegacy;
  ck.records.emplace_back("container", "tar");
  ck.heap = std::make_shared<Heap>();
  Heap& heap = *ck.heap;

  std::unordered_map<std::string, Stor> storages = read_storages(member("storages"), file, heap, lim);
  const std::unordered_map<std::string, Tens> tensors = read_tensors(member("tensors"), storages, heap, lim);

  // pickle: the object, its persistent ids resolved
  const ByteView pv = member("pickle");
  Unpickled obj = unpickle(pv, 0, heap, lim);
  ck.pickle_protocol = obj.protocol;
  ck.globals = std::move(obj.globals);
  resolve_pids(obj.root, heap, tensors, storages, pv, lim);
  std::unordered_map<std::string, const Stor*> roots;
  for (const auto& [k, s] : storages)
    if (s.byte_offset == 0 && k == s.root) roots.emplace(display_key(k), &s);
  TorchInterpreter interp(ck, pv, lim, [&roots, pv](Storage& s, const Value* at) {
    auto it = roots.find(s.key);
    if (it == roots.end() || it->second->root_numel != s.numel)
      pv.fail(at->offset, fmt::format("storage '{}' is not a root storage of the storages member", s.key));
    s.file_offset = it->second->file_offset;
    s.present = true;
  });
  interp.interpret(obj.root);
}


TarPickles torch_tar_pickles(const ByteView& file, const Limits& lim) {
  TarPickles out;
  try {
    const std::vector<TarMember> members = tar_members(file, lim);
    Heap heap;
    auto data_of = [&](const char* name) -> std::optional<ByteView> {
      const TarMember* m = find_tar_member(members, name);
      if (!m || !m->is_file()) return std::nullopt;
      return tar_member_data(file, *m);
    };
    auto take = [&](const char* name, const ByteView& v, uint64_t at) {
      Unpickled u = unpickle(v, at, heap, lim);
      out.pickles.push_back(TarPickle{name, v, at, u.end});
      return u;
    };
    if (auto sv = data_of("storages")) {
      Unpickled n = take("storages", *sv, 0);
      uint64_t pos = n.end;
      for (uint64_t k = 0, count = tar::count_of(n, *sv, lim, "storage"); k < count; ++k) {
        Unpickled a = take("storages", *sv, pos);
        const Value* t = tar::items_of(a.root, 3);
        const Value* cls = t ? t->kids()[2] : nullptr;
        const DType* dt = cls && cls->kind == PKind::Global
                              ? dtype_by_storage_class(cls->str() == "torch.cuda" ? "cuda." + std::string(cls->name())
                                                                              : std::string(cls->name()))
                              : nullptr;
        if (!dt) sv->fail(pos, "storage record names no storage type, so the bytes after it cannot be skipped");
        const int64_t numel = sv->le<int64_t>(a.end);
        uint64_t nbytes;
        if (numel < 0 || mul_overflows(static_cast<uint64_t>(numel), dt->itemsize, &nbytes))
          sv->fail(a.end, fmt::format("bad element count {}", numel));
        sv->sub(a.end + 8, nbytes, "storage data");
        pos = a.end + 8 + nbytes;
      }
      take("storages", *sv, pos);
    }
    if (auto tv = data_of("tensors")) {
      Unpickled n = take("tensors", *tv, 0);
      uint64_t pos = n.end;
      for (uint64_t k = 0, count = tar::count_of(n, *tv, lim, "tensor"); k < count; ++k) {
        Unpickled a = take("tensors", *tv, pos);
        const int32_t ndim = tv->le<int32_t>(a.end);
        if (ndim < 0 || ndim > 1024) tv->fail(a.end, fmt::format("{} dimensions", ndim));
        pos = a.end + 8 + 16 * static_cast<uint64_t>(ndim) + 8;
        tv->sub(a.end, pos - a.end, "tensor metadata");
      }
    }
    if (auto pv = data_of("pickle")) take("pickle", *pv, 0);
  } catch (const InputError& e) { out.stopped = e.render(); }
  return out;
}

}  // namespace ckpt
