#include "core/torch_pickle.h"
#include "core/pickle_text.h"  // py_digits

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <array>

namespace ckpt {

std::string join_path(const std::string& a, const std::string& b) { return a.empty() ? b : a + "." + b; }

StorageLocator zip_storage_locator(const ZipReader& zip, std::string dir, const ByteView& pkl) {
  // The records named exactly <dir><key> are indexed by key here (torch.save's 0, 1, 2, ... by number:
  // KeyIndex), so that lookups read no name from the central directory. Any other key, or an archive
  // with repeated names, goes through find(), which answers as torch's miniz does (with no repeats, an
  // exact name is the one record find() would give).
  KeyIndex by_key;
  if (!zip.repeats())
    for (size_t i = 0; i < zip.entries().size(); ++i)
      if (const std::string_view name = zip.entries()[i].name; name.size() > dir.size() && name.compare(0, dir.size(), dir) == 0)
        by_key.try_emplace(name.substr(dir.size()), static_cast<uint32_t>(i));
  return [&zip, dir = std::move(dir), pkl, member = std::string(), by_key = std::move(by_key)](Storage& s, const Value* at) mutable {
    const ZipEntry* e = nullptr;
    if (const uint32_t* i = by_key.find(s.key)) {
      e = &zip.entries()[*i];
    } else {
      member.assign(dir).append(s.key);
      e = zip.find(member);
    }
    if (!e) pkl.fail(at->offset, fmt::format("storage '{}' has no zip entry {}", s.key, member));
    s.member = e->name;
    s.local_header = e->local_header_offset;
    if (e->method != 0)
      pkl.fail(at->offset, fmt::format("storage entry {} is deflated; torch stores tensor data uncompressed", s.member));
    if (e->uncompressed_size < s.nbytes)
      pkl.fail(at->offset,
               fmt::format("storage '{}' needs {} bytes but {} holds {}", s.key, s.nbytes, s.member, e->uncompressed_size));
    s.present = true;
  };
}

namespace {


constexpr std::string_view kMagicDecimal = "119547037146038801333356";  // 0x1950a86a20f9469cfc6c

// Digits (most significant first, each < base) to decimal text, through base-1e9 limbs.
std::string digits_to_decimal(const std::vector<uint8_t>& digits, unsigned base) {
  std::vector<uint32_t> limbs{0};
  for (uint8_t d : digits) {
    uint64_t carry = d;
    for (auto& l : limbs) {
      const uint64_t y = static_cast<uint64_t>(l) * base + carry;
      l = static_cast<uint32_t>(y % 1000000000);
      carry = y / 1000000000;
    }
    if (carry) limbs.push_back(static_cast<uint32_t>(carry));
  }
  std::string out = std::to_string(limbs.back());
  for (size_t k = limbs.size() - 1; k-- > 0;) out += fmt::format("{:09d}", limbs[k]);
  return out;
}

// Two's-complement little-endian bytes (LONG1 / LONG4) as decimal text.
std::string le_bytes_decimal(std::string_view b) {
  if (b.empty()) return "0";
  std::vector<uint8_t> mag(b.rbegin(), b.rend());  // most significant first
  const bool neg = mag.front() & 0x80;
  if (neg) {
    for (auto& x : mag) x = static_cast<uint8_t>(~x);
    for (size_t k = mag.size(); k-- > 0;)
      if (++mag[k] != 0) break;
  }
  const std::string d = digits_to_decimal(mag, 256);
  return neg && d != "0" ? "-" + d : d;
}

bool c_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

}  // namespace

std::optional<std::string> python_int_text(std::string_view t, int base) {
  while (!t.empty() && c_space(t.front())) t.remove_prefix(1);
  while (!t.empty() && c_space(t.back())) t.remove_suffix(1);
  bool neg = false;
  if (!t.empty() && (t[0] == '+' || t[0] == '-')) {
    neg = t[0] == '-';
    t.remove_prefix(1);
  }
  unsigned radix = 10;
  bool prefixed = false, leading_zero_rule = false;
  if (t.size() >= 2 && t[0] == '0' && base == 0) {
    const char p = static_cast<char>(t[1] | 0x20);
    if (p == 'x' || p == 'o' || p == 'b') {
      radix = p == 'x' ? 16 : p == 'o' ? 8 : 2;
      prefixed = true;
      t.remove_prefix(2);
    }
  }
  if (base == 0 && !prefixed) leading_zero_rule = true;
  if (prefixed && !t.empty() && t[0] == '_') t.remove_prefix(1);
  if (t.empty() || t.size() > 4096) return std::nullopt;
  std::vector<uint8_t> digits;
  const bool ok = py_digits(t, [&](char c) {
    unsigned d;
    if (c >= '0' && c <= '9') d = static_cast<unsigned>(c - '0');
    else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') d = static_cast<unsigned>((c | 0x20) - 'a' + 10);
    else return false;
    if (d >= radix) return false;
    digits.push_back(static_cast<uint8_t>(d));
    return true;
  });
  if (!ok) return std::nullopt;
  // base 0: a decimal literal may not start with 0 unless it is all zeros ("00" is 0, "010" an error)
  if (leading_zero_rule && digits.front() == 0 && std::any_of(digits.begin(), digits.end(), [](uint8_t d) { return d != 0; }))
    return std::nullopt;
  const std::string mag = digits_to_decimal(digits, radix);
  return neg && mag != "0" ? "-" + mag : mag;
}

std::optional<std::string> int_value_text(const Value* v, const ByteView* pkl) {
  if (!v) return std::nullopt;
  if (v->kind == PKind::Int) return std::to_string(v->i);
  if (v->kind == PKind::Bool) return std::string(v->b ? "1" : "0");
  if (v->kind != PKind::BigInt) return std::nullopt;
  const uint8_t op = pkl && v->offset < pkl->size() ? pkl->u8(v->offset) : 0;
  std::string_view s = v->str();
  if (op == 'I') return python_int_text(s, 0);  // load_int: the line as it is
  if (op == 'L') {  // load_long: one trailing 'L' dropped
    if (!s.empty() && s.back() == 'L') s.remove_suffix(1);
    return python_int_text(s, 0);
  }
  if (op == 0x8a || op == 0x8b) return le_bytes_decimal(s);
  std::string_view text = s;
  if (!text.empty() && text.back() == 'L') text.remove_suffix(1);
  if (auto t = python_int_text(text, 0)) return t;
  return le_bytes_decimal(s);
}

bool is_legacy_magic(const Value* v, const ByteView* pkl) {
  const auto t = int_value_text(v, pkl);
  return t && *t == kMagicDecimal;
}

bool is_legacy_protocol_version(const Value* v, const ByteView* pkl) {
  if (v && v->kind == PKind::Float) return v->f == 1001.0;
  const auto t = int_value_text(v, pkl);
  return t && *t == "1001";
}

LegacyMagic classify_legacy_magic(const ByteView& file, const Unpickled& first, Heap& heap, const Limits& limits) {
  const Value* v = first.root;
  if (is_legacy_magic(v, &file)) return LegacyMagic::Magic;
  const bool call = v && v->kind == PKind::Object;
  const bool number = v &&
                      (v->kind == PKind::Int || v->kind == PKind::BigInt || v->kind == PKind::Bool || v->kind == PKind::Float);
  if ((!call && !number) || first.end >= file.size()) return LegacyMagic::None;
  try {
    const Unpickled second = unpickle(file, first.end, heap, limits);
    if (!is_legacy_protocol_version(second.root, &file)) return LegacyMagic::None;
  } catch (const InputError&) { return LegacyMagic::None; }
  return call ? LegacyMagic::Computed : LegacyMagic::WrongNumber;
}

namespace {

constexpr std::string_view kUtils = "torch._utils.";

}  // namespace

TorchInterpreter::TorchInterpreter(Checkpoint& ck, const ByteView& pkl, const Limits& limits, StorageLocator locate)
    : ck_(ck), pkl_(pkl), lim_(limits), locate_(std::move(locate)) {}

size_t TorchInterpreter::storage(const Value* pid, const Value* at) { return storage(storage_id(pid, at), at); }

size_t TorchInterpreter::storage(StorageId id, const Value* at) {
  if (const uint32_t* known = storage_index_.find(id.key)) return *known;
  if (id.numel > (1ull << 58)) fail(at, fmt::format("storage '{}' declares {} elements", id.key, id.numel));
  Storage s;
  s.key = id.key;
  s.dtype = id.dtype;
  s.numel = id.numel;
  s.nbytes = id.numel * id.dtype->itemsize;  // < 2^58 * 16
  s.device = id.location;
  locate_(s, at);
  ck_.storages.push_back(std::move(s));
  const auto index = static_cast<uint32_t>(ck_.storages.size() - 1);
  // torch.save's keys (0, 1, 2, ...) go by number; a view of any other is kept here
  storage_index_.try_emplace(storage_index_.by_number(id.key) ? std::string_view(id.key) : storage_keys_.emplace_back(std::move(id.key)),
                             index);
  return index;
}

void TorchInterpreter::fail(const Value* at, const std::string& msg) const { pkl_.fail(at ? at->offset : 0, msg); }

void TorchInterpreter::budget() {
  if (++visited_ > lim_.walk_nodes) pkl_.fail(0, fmt::format("object graph has more than {} nodes to visit", lim_.walk_nodes));
}

namespace {

const Value* arg(const Value* call, size_t k, const TorchInterpreter* /*unused*/ = nullptr) {
  const Value* a = call->args();
  if (!a || (a->kind != PKind::Tuple && a->kind != PKind::List) || k >= a->kids().size()) return nullptr;
  return a->kids()[k];
}

size_t nargs(const Value* call) {
  const Value* a = call->args();
  return a && (a->kind == PKind::Tuple || a->kind == PKind::List) ? a->kids().size() : 0;
}

}  // namespace

TorchInterpreter::StorageId TorchInterpreter::storage_id(const Value* pid, const Value* at) const {
  if (!pid || pid->kind != PKind::Tuple || pid->kids().size() < 5 || !pid->kids()[0]->is_str() || pid->kids()[0]->str() != "storage")
    fail(at, "persistent id is not a ('storage', type, key, location, numel) tuple");
  const auto& it = pid->kids();
  StorageId id = storage_id(it[1], it[2], it[3], it[4]->is_int() ? std::optional<int64_t>(it[4]->i) : std::nullopt, at);
  if (it.size() > 5 && it[5]->kind == PKind::Tuple) id.view = it[5];
  return id;
}

TorchInterpreter::StorageId TorchInterpreter::storage_id(const Value* cls, const Value* key, const Value* location,
                                                         std::optional<int64_t> numel, const Value* at) const {
  StorageId id;
  if (cls->kind != PKind::Global) fail(at, "storage type in persistent id is not a global");
  if (cls->name() == "UntypedStorage") id.dtype = dtype_uint8();
  else id.dtype = dtype_by_storage_class(cls->name());  // torch.cuda.FloatStorage: the same dtype
  if (!id.dtype) fail(at, fmt::format("unknown storage type {}.{}", cls->str(), cls->name()));
  if (key->is_str()) id.key = key->str();
  else if (key->is_int()) id.key = std::to_string(key->i);
  else fail(at, "storage key is neither a string nor an int");
  if (!location->is_str()) fail(at, "storage location is not a string");
  id.location = location->str();
  if (!numel || *numel < 0) fail(at, "storage size is not a non-negative int");
  id.numel = static_cast<uint64_t>(*numel);
  return id;
}

bool TorchInterpreter::is_tensor(const Value* v) const {
  if (!v || v->kind != PKind::Object) return false;
  const Value* c = v->callable();
  if (!c || c->kind != PKind::Global) return false;
  if (c->str() == "torch._utils") return c->name().rfind("_rebuild_", 0) == 0 && c->name() != "_rebuild_qtensor_params";
  if (c->str() == "torch._tensor") return c->name() == "_rebuild_from_type_v2" || c->name() == "_rebuild_from_type";
  if (c->str() == "torch.nn.parameter") return c->name() == "UninitializedParameter" || c->name() == "UninitializedBuffer";
  return false;
}

namespace {

struct Ints {
  std::vector<int64_t> v;
  bool ok = false;
};

// A tuple / list of ints, or torch.Size((...)).
Ints int_list(const Value* x) {
  Ints r;
  if (!x) return r;
  if (x->kind == PKind::Object && x->qualified() == "torch.Size" && x->args() && x->args()->kind == PKind::Tuple &&
      x->args()->kids().size() == 1)
    x = x->args()->kids()[0];
  if (x->kind != PKind::Tuple && x->kind != PKind::List) return r;
  for (const Value* e : x->kids()) {
    if (!e->is_int()) return r;
    r.v.push_back(e->i);
  }
  r.ok = true;
  return r;
}

bool truthy(const Value* v) {
  if (!v) return false;
  if (v->kind == PKind::Bool) return v->b;
  if (v->kind == PKind::Int) return v->i != 0;
  return false;
}

// The dtype a GLOBAL names (torch.float32), nullptr for anything else.
const DType* global_dtype(const Value* d) { return d && d->kind == PKind::Global ? dtype_by_name(d->name()) : nullptr; }

}  // namespace

// One rebuild call being read: the call, the name its errors give, and the tensor it makes.
struct TorchInterpreter::Rebuild {
  const Value* v;
  const std::string& name;
  Tensor& t;
};

void TorchInterpreter::need(const Rebuild& r, size_t lo, size_t hi) const {
  const size_t n = nargs(r.v);
  if (n >= lo && n <= hi) return;
  const Value* c = r.v->callable();
  fail(r.v, fmt::format("{}.{} for '{}' has {} arguments, expected {} {}", c->str(), c->name(), r.name, n,
                        n < lo ? "at least" : "at most", n < lo ? lo : hi));
}

void TorchInterpreter::dims(const Rebuild& r, std::span<const int64_t> sz, std::span<const int64_t> st) const {
  if (sz.size() != st.size()) fail(r.v, fmt::format("'{}' has {} sizes but {} strides", r.name, sz.size(), st.size()));
  uint64_t numel = 1;
  for (size_t k = 0; k < sz.size(); ++k) {
    if (sz[k] < 0 || st[k] < 0) fail(r.v, fmt::format("'{}' has a negative size or stride", r.name));
    if (mul_overflows(numel, static_cast<uint64_t>(sz[k]), &numel) || numel > (1ull << 62))
      fail(r.v, fmt::format("'{}' has more elements than fit in 64 bits", r.name));
  }
  r.t.shape.assign(sz.begin(), sz.end());
  r.t.stride.assign(st.begin(), st.end());
  r.t.numel = static_cast<int64_t>(numel);
}

void TorchInterpreter::shape_stride(const Rebuild& r, const Value* size, const Value* stride) const {
  Ints sz = int_list(size), st = int_list(stride);
  if (!sz.ok) fail(r.v, fmt::format("size of '{}' is not a tuple of ints", r.name));
  if (!st.ok) fail(r.v, fmt::format("stride of '{}' is not a tuple of ints", r.name));
  dims(r, sz.v, st.v);
}

void TorchInterpreter::bytes_of(const Rebuild& r) const {
  if (!r.t.dtype) fail(r.v, fmt::format("'{}' has no dtype", r.name));
  r.t.bytes = dtype_bytes(*r.t.dtype, static_cast<uint64_t>(r.t.numel));  // numel < 2^62 checked by dims
}

void TorchInterpreter::bind(const Rebuild& r, size_t idx, std::optional<int64_t> offset, const Value* pid,
                            const DType* explicit_dtype) {
  const Value* v = r.v;
  Tensor& t = r.t;
  Storage& s = ck_.storages[idx];
  s.in_model |= in_model_;
  t.storage = s.key;
  t.device = s.device;
  t.dtype = explicit_dtype ? explicit_dtype : s.dtype;
  if (!offset || *offset < 0) fail(v, fmt::format("storage offset of '{}' is not a non-negative int", r.name));
  t.offset = *offset;
  // Legacy storage views: a sixth pid field (view_key, offset, size) shifts the offset.
  if (pid && pid->kind == PKind::Tuple && pid->kids().size() > 5) {
    const Value* view = pid->kids()[5];
    if (view->kind == PKind::Tuple && view->kids().size() >= 2 && view->kids()[1]->is_int() && view->kids()[1]->i >= 0)
      t.offset += view->kids()[1]->i;
  }
  bytes_of(r);
  if (t.numel > 0) {
    uint64_t extent = static_cast<uint64_t>(t.offset) + 1, span;
    for (size_t k = 0; k < t.shape.size(); ++k) {
      if (mul_overflows(static_cast<uint64_t>(t.shape[k] - 1), static_cast<uint64_t>(t.stride[k]), &span) ||
          add_overflows(extent, span, &extent))
        fail(v, fmt::format("'{}' extent overflows", r.name));
    }
    if (extent > (1ull << 62) || dtype_bytes(*t.dtype, extent) > s.nbytes)
      fail(v, fmt::format("'{}' ({} x {} from offset {}) reaches past its storage '{}' of {} bytes", r.name, t.numel,
                          t.dtype->name, t.offset, s.key, s.nbytes));
  }
}

void TorchInterpreter::with_storage(const Rebuild& r, const Value* pidv, const Value* offset,
                                    const DType* explicit_dtype) {
  if (!pidv || pidv->kind != PKind::PersId) fail(r.v, fmt::format("storage of '{}' is not a persistent id", r.name));
  const Value* pid = pidv->args();
  const size_t idx = storage(pid, r.v);
  bind(r, idx, offset && offset->is_int() ? std::optional<int64_t>(offset->i) : std::nullopt, pid, explicit_dtype);
}

// UninitializedParameter(requires_grad) / UninitializedBuffer: no shape, no storage.
void TorchInterpreter::uninitialized(const Rebuild& r) const {
  const std::string_view fn = r.v->callable()->name();
  Tensor& t = r.t;
  t.state = TensorState::Uninitialized;
  t.requires_grad = truthy(arg(r.v, 0));
  t.kind = fn == "UninitializedBuffer" ? TensorKind::Buffer : TensorKind::Parameter;
  t.kind_inferred = false;
  t.is_parameter_object = fn == "UninitializedParameter";
  if (const Value* d = r.v->kwargs() ? r.v->kwargs()->get("dtype") : nullptr; d && d->kind == PKind::Global)
    t.dtype = dtype_by_name(d->name());
  t.device = "";
}

// torch._tensor._rebuild_from_type_v2(func, type, args, state): the tensor func(*args) makes, as `type`.
void TorchInterpreter::from_type(const Rebuild& r) {
  need(r, 4, 4);
  const Value* v = r.v;
  const Value* func = arg(v, 0);
  const Value* type = arg(v, 1);
  const Value* args = arg(v, 2);
  Value call;  // a synthetic call of func(*args), never stored
  ObjExt ext;
  call.kind = PKind::Object;
  call.ext = &ext;
  ext.callable = const_cast<Value*>(func);
  ext.args = const_cast<Value*>(args);
  call.offset = v->offset;
  if (!is_tensor(&call))
    fail(v, fmt::format("'{}' is rebuilt by {} which is not a tensor rebuild function", r.name, func ? func->qualified() : "?"));
  Tensor& t = r.t;
  t = tensor(&call, r.name);
  t.identity = v;
  std::string q = type ? type->qualified() : "";
  if (q == "torch.nn.parameter.Parameter") {
    t.is_parameter_object = true;
    t.kind = TensorKind::Parameter;
    t.kind_inferred = false;
  } else if (q != "torch.Tensor" && !q.empty()) {
    t.x.mut().subclass = q;
  }
}

// _rebuild_parameter(data, requires_grad, backward_hooks) and _rebuild_parameter_with_state (..., state):
// the tensor it wraps, as a Parameter.
void TorchInterpreter::parameter(const Rebuild& r) {
  const size_t n = r.v->callable()->name() == "_rebuild_parameter_with_state" ? 4 : 3;
  need(r, n, n);
  const Value* data = arg(r.v, 0);
  if (!is_tensor(data)) fail(r.v, fmt::format("parameter '{}' does not wrap a tensor", r.name));
  Tensor& t = r.t;
  t = tensor(data, r.name);
  t.identity = r.v;
  t.requires_grad = truthy(arg(r.v, 1));
  t.is_parameter_object = true;
  t.kind = TensorKind::Parameter;
  t.kind_inferred = false;
}

// _rebuild_tensor(storage, offset, size, stride), _v2 (..., requires_grad, backward_hooks[, metadata]) and
// _v3 (..., dtype): a strided view of a storage; v3's dtype over the storage's.
void TorchInterpreter::strided(const Rebuild& r, bool v3) {
  if (v3) need(r, 7, 8);  // ..., dtype[, metadata]
  else if (r.v->callable()->name() == "_rebuild_tensor") need(r, 4, 4);
  else need(r, 6, 7);  // ..., backward_hooks[, metadata]
  const DType* dt = nullptr;
  if (v3) {
    const Value* d = arg(r.v, 6);
    dt = global_dtype(d);
    if (!dt)
      fail(r.v, fmt::format("'{}' has unknown dtype {}", r.name, d && d->kind == PKind::Global ? d->qualified() : "?"));
  }
  shape_stride(r, arg(r.v, 2), arg(r.v, 3));
  with_storage(r, arg(r.v, 0), arg(r.v, 1), dt);
  r.t.requires_grad = truthy(arg(r.v, 4));  // v1 has no requires_grad: nargs 4, so none
}

// A tensor with no storage (meta, a wrapper subclass): its dtype, the GLOBAL at argument `at`, the size
// and stride after it, its bytes. `what` starts the unknown-dtype error ("meta tensor ").
void TorchInterpreter::storageless(const Rebuild& r, size_t at, std::string_view what) const {
  r.t.dtype = global_dtype(arg(r.v, at));
  if (!r.t.dtype) fail(r.v, fmt::format("{}'{}' has an unknown dtype", what, r.name));
  shape_stride(r, arg(r.v, at + 1), arg(r.v, at + 2));
  bytes_of(r);
}

// _rebuild_meta_tensor_no_storage(dtype, size, stride, requires_grad): a shape on the meta device.
void TorchInterpreter::meta(const Rebuild& r) const {
  need(r, 4, 4);
  storageless(r, 0, "meta tensor ");
  r.t.requires_grad = truthy(arg(r.v, 3));
  r.t.state = TensorState::Meta;
  r.t.device = "meta";
}

// _rebuild_qtensor(storage, offset, size, stride, qparams, requires_grad, ...): the scheme and a per-tensor
// scale / zero point from qparams.
void TorchInterpreter::quantized(const Rebuild& r) {
  need(r, 7, 7);
  Tensor& t = r.t;
  shape_stride(r, arg(r.v, 2), arg(r.v, 3));
  with_storage(r, arg(r.v, 0), arg(r.v, 1), nullptr);
  t.layout = Layout::Quantized;
  const Value* qp = arg(r.v, 4);
  if (qp && qp->kind == PKind::Tuple && !qp->kids().empty() && qp->kids()[0]->kind == PKind::Global)
    t.x.mut().qscheme = qp->kids()[0]->name();
  if (qp && qp->kind == PKind::Tuple && qp->kids().size() >= 3 && t.x->qscheme.find("per_tensor_affine") != std::string::npos) {
    const Value* sc = qp->kids()[1];
    const Value* zp = qp->kids()[2];
    if (sc && sc->kind == PKind::Float) t.x.mut().q_scale = sc->f;
    if (sc && sc->is_int()) t.x.mut().q_scale = static_cast<double>(sc->i);
    if (zp && zp->is_int()) t.x.mut().q_zero_point = zp->i;
  }
  // Per-channel scales and zero points are tensors with storages of their own.
  if (qp && qp->kind == PKind::Tuple)
    for (const Value* q : qp->kids())
      if (is_tensor(q)) tensor(q, r.name + " (qparams)");
  t.requires_grad = truthy(arg(r.v, 5));
}

// _rebuild_sparse_tensor / _rebuild_sparse_csr_tensor(layout, data): the layout, the parts' bytes, the dense
// size; dtype, device and storage those of the values.
void TorchInterpreter::sparse(const Rebuild& r) {
  need(r, 2, 2);
  const Value* v = r.v;
  const std::string& name = r.name;
  Tensor& t = r.t;
  const Value* layout = arg(v, 0);
  const Value* data = arg(v, 1);
  if (!data || data->kind != PKind::Tuple || data->kids().size() < 3)
    fail(v, fmt::format("sparse tensor '{}' has malformed data", name));
  // The layout is GLOBAL torch.sparse_coo, or REDUCE(torch.serialization._get_layout, ('torch.sparse_coo',)).
  std::string_view named = "sparse";
  if (layout && layout->kind == PKind::Global) named = layout->name();
  if (layout && layout->kind == PKind::Object && nargs(layout) == 1 && arg(layout, 0)->is_str()) {
    named = arg(layout, 0)->str();
    if (named.substr(0, 6) == "torch.") named.remove_prefix(6);
  }
  t.layout = layout_from_name(named);
  if (t.layout == Layout::Other) t.x.mut().layout_name = std::string(named);
  const bool coo = t.layout == Layout::SparseCoo;
  // coo: (indices, values, size[, coalesced]); compressed: (compressed, plain, values, size)
  const size_t nparts = coo ? 2 : 3;
  if (data->kids().size() < nparts + 1) fail(v, fmt::format("sparse tensor '{}' has malformed data", name));
  uint64_t stored = 0;
  for (size_t k = 0; k < nparts; ++k) {
    if (!is_tensor(data->kids()[k])) fail(v, fmt::format("sparse tensor '{}' component {} is not a tensor", name, k));
    Tensor part = tensor(data->kids()[k], name);
    stored += part.bytes;
    if (k == nparts - 1) {
      t.dtype = part.dtype;
      t.device = part.device;
      t.storage = part.storage;
    }
  }
  Ints sz = int_list(data->kids()[nparts]);
  if (!sz.ok) fail(v, fmt::format("sparse tensor '{}' has no size", name));
  uint64_t numel = 1;
  for (int64_t d : sz.v) {
    if (d < 0 || mul_overflows(numel, static_cast<uint64_t>(d), &numel))
      fail(v, fmt::format("sparse tensor '{}' size overflows", name));
  }
  t.shape = sz.v;
  t.numel = static_cast<int64_t>(numel);
  t.bytes = stored;
}

// _rebuild_nested_tensor(buffer, sizes, strides, offsets): the buffer, as a nested tensor.
void TorchInterpreter::nested(const Rebuild& r) {
  need(r, 4, 4);
  if (!is_tensor(arg(r.v, 0))) fail(r.v, fmt::format("nested tensor '{}' has no buffer", r.name));
  Tensor buf = tensor(arg(r.v, 0), r.name);
  r.t = buf;
  r.t.identity = r.v;
  r.t.layout = Layout::Nested;
}

// _rebuild_device_tensor_from_cpu_tensor(data, dtype, device, requires_grad): the CPU tensor it wraps, on
// its device. (_rebuild_xla_tensor and _rebuild_mlc_tensor take a numpy array, as
// _rebuild_device_tensor_from_numpy does: named entries, below.)
void TorchInterpreter::device_copy(const Rebuild& r) {
  need(r, 4, 4);
  if (!is_tensor(arg(r.v, 0))) fail(r.v, fmt::format("'{}' does not wrap a CPU tensor", r.name));
  Tensor& t = r.t;
  t = tensor(arg(r.v, 0), r.name);
  t.identity = r.v;
  if (const Value* dev = arg(r.v, 2); dev && dev->is_str()) t.device = dev->str();
  t.requires_grad = truthy(arg(r.v, 3));
}

// _rebuild_wrapper_subclass(cls, dtype, size, stride, storage_offset, layout, device, requires_grad): a
// shape and a dtype, the subclass named; no storage.
void TorchInterpreter::wrapper_subclass(const Rebuild& r) const {
  need(r, 8, 8);
  storageless(r, 1, "");
  r.t.x.mut().subclass = arg(r.v, 0) ? arg(r.v, 0)->qualified() : "";
  r.t.requires_grad = truthy(arg(r.v, 7));
}

Tensor TorchInterpreter::tensor(const Value* v, const std::string& name) {
  budget();
  // A parameter wraps a tensor, a subclass a rebuild, a sparse tensor its parts: a crafted pickle can make
  // that chain loop back on itself (a parameter whose data is the parameter).
  if (rebuild_depth_ >= 32) fail(v, fmt::format("'{}' is rebuilt from tensors nested more than 32 deep", name));
  struct Level {
    int& depth;
    explicit Level(int& d) : depth(++d) {}
    ~Level() { --depth; }
  } level(rebuild_depth_);
  Tensor t;
  t.name = name;
  t.identity = v;
  const Rebuild r{v, name, t};

  if (const PackedTensor* p = v->packed()) {  // _rebuild_tensor_v2 as torch.save writes it: the same checks
    dims(r, {p->sizes(), p->ndim}, {p->strides(), p->ndim});
    bind(r, storage(storage_id(p->cls, p->key, p->location, p->numel, v), v), p->offset, nullptr, nullptr);
    t.requires_grad = p->requires_grad;
    return t;
  }

  const Value* c = v->callable();
  const std::string_view fn = c->name();
  if (c->str() == "torch.nn.parameter") uninitialized(r);
  else if (c->str() == "torch._tensor") from_type(r);
  else if (fn == "_rebuild_parameter" || fn == "_rebuild_parameter_with_state") parameter(r);
  else if (fn == "_rebuild_tensor_v2" || fn == "_rebuild_tensor") strided(r, false);
  else if (fn == "_rebuild_tensor_v3") strided(r, true);
  else if (fn == "_rebuild_meta_tensor_no_storage") meta(r);
  else if (fn == "_rebuild_qtensor") quantized(r);
  else if (fn == "_rebuild_sparse_tensor" || fn == "_rebuild_sparse_csr_tensor") sparse(r);
  else if (fn == "_rebuild_nested_tensor") nested(r);
  else if (fn == "_rebuild_device_tensor_from_cpu_tensor") device_copy(r);
  else if (fn == "_rebuild_wrapper_subclass") wrapper_subclass(r);
  else {  // anything else in the family (numpy-backed device tensors, ...) is kept as a named entry
    t.x.mut().subclass = c->qualified();
    t.layout = Layout::Opaque;
    t.device = "";
  }
  return t;
}

bool TorchInterpreter::is_module(const Value* v) const {
  return v && v->kind == PKind::Object && v->state() && v->state()->kind == PKind::Dict && v->state()->get("_parameters") &&
         v->state()->get("_modules");
}

void TorchInterpreter::walk_module(const Value* v, const std::string& path, int depth) {
  if (depth > static_cast<int>(lim_.pickle_depth)) fail(v, "modules nest deeper than the limit");
  budget();
  if (!on_path_.insert(v).second) return;  // a module inside itself: torch's object has it once
  struct Leave {
    std::unordered_set<const Value*>& path;
    const Value* v;
    ~Leave() { path.erase(v); }
  } leave{on_path_, v};
  Module m;
  m.name = path;
  const Value* cls = v->callable();
  // protocol 0/1: copyreg._reconstructor(cls, object, None)
  if (cls && cls->qualified() == "copyreg._reconstructor" && nargs(v) >= 1) cls = arg(v, 0);
  if (cls && cls->kind == PKind::Global) {
    m.type = cls->name();
    m.qualified_type = cls->qualified();
  }
  const Value* st = v->state();
  if (const Value* tr = st->get("training"); tr && tr->kind == PKind::Bool) m.training = tr->b;
  ck_.modules.push_back(std::move(m));
  auto members = [&](const char* field, TensorKind kind) {
    const Value* d = st->get(field);
    if (!d) return;
    each_entry(d->pairs(), [&](const Value* key, const Value* value) {
      if (!key->is_str() || value->kind == PKind::None || !is_tensor(value)) return;
      if (ck_.tensors.size() >= lim_.tensors) fail(value, fmt::format("more than {} tensors", lim_.tensors));
      Tensor t = tensor(value, join_path(path, std::string(key->str())));
      t.kind = kind;
      t.kind_inferred = false;
      ck_.tensors.push_back(std::move(t));
    });
  };
  members("_parameters", TensorKind::Parameter);
  members("_buffers", TensorKind::Buffer);
  each_entry(st->get("_modules")->pairs(), [&](const Value* key, const Value* value) {
    if (key->is_str() && is_module(value)) walk_module(value, join_path(path, std::string(key->str())), depth + 1);
  });
}

void TorchInterpreter::collect(const Value* v, const std::string& path, int depth) {
  if (depth > static_cast<int>(lim_.pickle_depth)) fail(v, "containers nest deeper than the limit");
  budget();
  if (is_tensor(v)) {
    if (ck_.tensors.size() >= lim_.tensors) fail(v, fmt::format("more than {} tensors", lim_.tensors));
    ck_.tensors.push_back(tensor(v, path));
    return;
  }
  if (is_module(v)) {
    walk_module(v, path, depth);
    return;
  }
  const bool container = v->kind == PKind::Dict || (v->kind == PKind::Object && !v->pairs().empty()) || v->kind == PKind::List ||
                         v->kind == PKind::Tuple;
  if (!container) return;
  // A container inside itself (d['self'] = d): torch's object has each tensor in it once, so the way
  // back into a container being walked is not taken again.
  if (!on_path_.insert(v).second) return;
  struct Leave {
    std::unordered_set<const Value*>& path;
    const Value* v;
    ~Leave() { path.erase(v); }
  } leave{on_path_, v};
  if (v->kind == PKind::Dict || (v->kind == PKind::Object && !v->pairs().empty())) {
    const auto& p = v->pairs();
    // A big mapping (a state dict) is mostly tensors: room for them at once, not by doubling.
    if (const size_t n = p.size() / 2; n > 1024 && ck_.tensors.capacity() - ck_.tensors.size() < n) {
      ck_.tensors.reserve(std::min<size_t>(ck_.tensors.size() + n, lim_.tensors));
      ck_.storages.reserve(std::min<size_t>(ck_.storages.size() + n, lim_.tensors));
    }
    std::string child;  // join_path(path, key), in one buffer for every key
    size_t k = 0;
    each_entry(p, [&](const Value* key, const Value* value) {
      if (read_past_ && k++ % 4096 == 0 && key->offset > told_) (*read_past_)(told_ = key->offset);
      if (!key->is_str() && !key->is_int()) return;
      child.assign(path);
      if (!path.empty()) child += '.';
      if (key->is_str()) child += key->str();
      else child += std::to_string(key->i);
      collect(value, child, depth + 1);
    });
    return;
  }
  if (v->kind == PKind::List || v->kind == PKind::Tuple) {
    for (size_t k = 0; k < v->kids().size(); ++k) collect(v->kids()[k], join_path(path, std::to_string(k)), depth + 1);
  }
}

nlohmann::ordered_json TorchInterpreter::tensor_summary(const Value* v) {
  Tensor t = tensor(v, "");
  std::string shape;
  for (size_t k = 0; k < t.shape.size(); ++k) shape += (k ? ", " : "") + std::to_string(t.shape[k]);
  return nlohmann::ordered_json{{"__tensor__", fmt::format("{}[{}]", t.dtype ? t.dtype->name : "?", shape)}};
}

nlohmann::ordered_json TorchInterpreter::plain(const Value* v, int /*depth*/) {
  return plain_json(v, [this](const Value* x) -> std::optional<nlohmann::ordered_json> {
    budget();
    if (is_tensor(x)) return tensor_summary(x);
    return std::nullopt;
  });
}

const Value* dict_value(const Value* dict, std::string_view k) {
  return dict && (dict->kind == PKind::Dict || dict->kind == PKind::Object) ? dict->get(k) : nullptr;
}
bool dict_like(const Value* v) {
  return v && (v->kind == PKind::Dict ||
               (v->kind == PKind::Object && (!v->pairs().empty() || v->qualified() == "collections.OrderedDict")));
}

void TorchInterpreter::interpret(const Value* root) {
  ck_.content = Content::Object;
  if (is_module(root)) {
    ck_.content = Content::Module;
    ck_.split_inferred = false;
    walk_module(root, "", 0);
  } else if (dict_like(root)) {
    const Value* model = nullptr;
    const bool is_lightning = dict_value(root, "pytorch-lightning_version") ||
                              (dict_value(root, "state_dict") && (dict_value(root, "epoch") || dict_value(root, "global_step")));
    bool direct_tensors = false;
    for (size_t k = 1; k < root->pairs().size(); k += 2) direct_tensors |= is_tensor(root->pairs()[k]);
    if (is_lightning) {
      ck_.format = Format::Lightning;
      ck_.content = Content::Lightning;
      ck_.model_key = "state_dict";
      model = dict_value(root, "state_dict");
    } else if (direct_tensors) {
      ck_.content = Content::StateDict;
      model = root;
    } else {
      for (std::string_view k : {"state_dict", "model_state_dict", "model", "module", "net", "network", "model_ema", "ema"}) {
        const Value* m = dict_value(root, k);
        if (m && (dict_like(m) || is_module(m))) {
          model = m;
          ck_.model_key = std::string(k);
          ck_.content = Content::Checkpoint;
          break;
        }
      }
    }
    if (model) {
      if (is_module(model)) {
        ck_.split_inferred = false;
        walk_module(model, "", 0);
      } else {
        collect(model, "", 0);
      }
      if (model != root) lightning(root);
    } else {
      collect(root, "", 0);
    }
  } else {
    collect(root, "", 0);
  }
  if (ck_.modules.empty()) infer_kinds(ck_.tensors);
  mark_plain_tensors(ck_);
}

}  // namespace ckpt
