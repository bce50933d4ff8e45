// Machine's packing of torch.save's _rebuild_tensor_v2 calls into a few fields as they are read, and its
// skim of a state dict's _metadata (pickle_machine.h).
#include "core/pickle_machine.h"

namespace ckpt::pickle_detail {

namespace {

// A value with nothing but its kind's own fields (no ext: no BUILD, SETITEMS or call behind it).
bool plain(const Value* v, PKind k) { return v->kind == k && v->ext == nullptr; }

// Whether `n` bytes from `at` are within `v`.
bool have(const ByteView& v, uint64_t at, uint64_t n) { return at <= v.size() && n <= v.size() - at; }

uint32_t le32(const uint8_t* p) {
  uint32_t x = 0;
  std::memcpy(&x, p, 4);  // little-endian, as every host ckpt builds for
  return x;
}

constexpr std::string_view kMetadata = "_metadata";

}  // namespace

// A _rebuild_tensor_v2 call as pack_form reads it, before the rewind overwrites its values: those the
// packed call keeps (copied again after the rewind) and its numbers.
struct Machine::PackForm {
  Value* word;
  Value* cls;
  Value* key;
  Value* loc;
  Value* hooks_fn;  // OrderedDict's Global for OrderedDict() hooks, null for {}
  uint32_t back[6];  // how far before the REDUCE the args, pid, pers, size, stride and hooks were made
  int64_t numel;
  int64_t offset;
  bool requires_grad;
  size_t ndim;
  int64_t dims[128];  // the sizes, then the strides
};

// A global the pickle names (not computed at load time).
bool Machine::named_global(const Value* g, std::string_view module, std::string_view name) const {
  return g->kind == PKind::Global && g->str() == module && g->name() == name &&
         !out_.globals[static_cast<size_t>(g->ext->global)].computed;
}

bool Machine::ordered_global(const Value* g) const { return g && named_global(g, "collections", "OrderedDict"); }

// The backward hooks of a packed call: {} or OrderedDict(), whose Global goes to `hooks_fn`.
bool Machine::pack_hooks(const Value* hooks, Value*& hooks_fn) const {
  hooks_fn = nullptr;
  if (hooks->kind == PKind::Object) {
    const ObjExt* e = hooks->ext;
    if (hooks->how != ObjHow::Reduce || !hooks->kids().empty() || !e || !ordered_global(e->callable) || !e->args ||
        !plain(e->args, PKind::Tuple) || !e->args->kids().empty() || e->kwargs || e->state || !e->dict.empty() || e->packed)
      return false;
    hooks_fn = e->callable;
  } else if (!plain(hooks, PKind::Dict) || !hooks->kids().empty()) {
    return false;
  }
  return true;
}

// Whether `args` has the form PackedTensor describes: (PersId(('storage', cls, key, location, numel)),
// offset, size, stride, requires_grad, hooks) of plain values; `f` then holds what packing needs of them.
bool Machine::pack_form(const Value* args, PackForm& f) const {
  if (!plain(args, PKind::Tuple) || args->kids().size() != 6) return false;
  const Kids& a = args->kids();
  const Value* pers = a[0];
  if (pers->kind != PKind::PersId || !pers->ext || pers->ext->callable || pers->ext->kwargs || pers->ext->state ||
      !pers->ext->dict.empty() || !pers->kids().empty() || !pers->ext->args)
    return false;
  const Value* pid = pers->ext->args;
  if (!plain(pid, PKind::Tuple) || pid->kids().size() != 5) return false;
  f.word = pid->kids()[0];
  f.cls = pid->kids()[1];
  f.key = pid->kids()[2];
  f.loc = pid->kids()[3];
  const Value* numel = pid->kids()[4];
  if (!f.word->is_str() || f.word->str() != "storage" || f.cls->kind != PKind::Global ||
      out_.globals[static_cast<size_t>(f.cls->ext->global)].computed || !f.key->is_str() || !f.loc->is_str() ||
      !plain(numel, PKind::Int))
    return false;
  const Value* offset = a[1];
  const Value* size = a[2];
  const Value* stride = a[3];
  const Value* grad = a[4];
  const Value* hooks = a[5];
  if (!plain(offset, PKind::Int) || !plain(size, PKind::Tuple) || !plain(stride, PKind::Tuple) || !plain(grad, PKind::Bool))
    return false;
  const size_t ndim = size->kids().size();
  if (ndim != stride->kids().size() || ndim > 64) return false;
  for (size_t k = 0; k < ndim; ++k)
    if (!plain(size->kids()[k], PKind::Int) || !plain(stride->kids()[k], PKind::Int)) return false;
  if (!pack_hooks(hooks, f.hooks_fn)) return false;
  const Value* located[6] = {args, pid, pers, size, stride, hooks};
  for (size_t k = 0; k < 6; ++k) {
    if (located[k]->offset > op_at_ || op_at_ - located[k]->offset > UINT32_MAX) return false;
    f.back[k] = static_cast<uint32_t>(op_at_ - located[k]->offset);
  }
  f.numel = numel->i;
  f.offset = offset->i;
  f.requires_grad = grad->b;
  f.ndim = ndim;
  for (size_t k = 0; k < ndim; ++k) {
    f.dims[k] = size->kids()[k]->i;
    f.dims[ndim + k] = stride->kids()[k]->i;
  }
  return true;
}

// Keeps `v` across the rewind to `since` when it was made after it: false for a container, or past 32
// values. Each is copied out (with its ext: a Global's name) before the rewind and made again after it.
bool Machine::pack_keep(const Heap::Pos& since, Value* v) {
  if (!heap_.since(since, v)) return true;
  switch (v->kind) {
    case PKind::Tuple:
    case PKind::List:
    case PKind::Dict:
    case PKind::Set:
    case PKind::FrozenSet:
    case PKind::Object:
    case PKind::PersId: return false;
    default: break;
  }
  for (const Kept& k : kept_)
    if (k.from == v) return true;
  if (kept_.size() == 32 || (v->ext && (v->ext->state || !v->ext->dict.empty()))) return false;
  kept_.push_back({v, *v, v->ext ? *v->ext : ObjExt(), nullptr});
  return true;
}

// What the rewind to the MARK at `at` must keep or drop: the packed call's scalars and the memo's, when
// made since the MARK, and the one-per-pickle nodes (small ints, None, bools, the empty tuple) made since:
// their copy when the memo keeps one, else made again when next needed.
bool Machine::pack_survivors(const MarkAt& at, const PackForm& f) {
  kept_.clear();
  for (Value* v : {f.word, f.cls, f.key, f.loc, f.hooks_fn})
    if (v && !pack_keep(at.pos, v)) return false;
  pack_slots_.clear();
  for (size_t k = at.memo_log; k < memo_log_.size(); ++k) {
    Value** slot = memo_slot(memo_log_[k]);
    if (!slot || !*slot || is_unmade(*slot) || !heap_.since(at.pos, *slot)) continue;
    const bool kept_value = pack_keep(at.pos, *slot);
    if (!kept_value && kept_.size() == 32) return false;
    pack_slots_.push_back({slot, kept_value});
  }
  caches_.clear();
  for (size_t k = at.caches; k < cache_log_.size(); ++k)
    if (Value*& c = *cache_log_[k]; c && heap_.since(at.pos, c)) caches_.push_back({&c, c});
  return true;
}

// Where a value kept across the rewind went (others stay where they are).
Value* Machine::pack_moved(Value* v) const {
  for (const Kept& k : kept_)
    if (k.from == v) return k.to;
  return v;
}

// Rewinds the heap to the MARK at `at`: the kept values made again, the memo's dropped ones kDropped.
void Machine::pack_rewind(const MarkAt& at) {
  heap_.rewind(at.pos);
  for (Kept& kp : kept_) {
    kp.to = heap_.make(kp.v.kind, kp.v.offset);
    *kp.to = kp.v;
    if (kp.v.ext) {
      kp.to->ext = nullptr;
      *heap_.ext(kp.to) = kp.e;
    }
  }
  for (const PackSlot& s : pack_slots_) *s.slot = s.keep ? pack_moved(*s.slot) : &kDropped;
  for (const Cache& c : caches_) {
    Value* to = pack_moved(c.was);
    *c.at = to == c.was ? nullptr : to;
  }
  memo_log_.resize(at.memo_log);
  cache_log_.resize(at.caches);
}

// The REDUCE of `fn` as one Object holding its PackedTensor.
Value* Machine::packed_call(Value* fn, const PackForm& f, uint32_t depth) {
  const size_t ndim = f.ndim;
  Value* o = make(PKind::Object);
  o->how = ObjHow::Reduce;
  o->depth = depth;
  ObjExt* e = heap_.ext(o);
  e->callable = fn;
  auto* p = new (heap_.alloc(sizeof(PackedTensor) + sizeof(int64_t) * (ndim ? 2 * ndim - 1 : 0), alignof(PackedTensor))) PackedTensor();
  p->heap = &heap_;
  p->reduce_at = op_at_;
  p->storage_word = pack_moved(f.word);
  p->cls = pack_moved(f.cls);
  p->key = pack_moved(f.key);
  p->location = pack_moved(f.loc);
  p->hooks_fn = f.hooks_fn ? pack_moved(f.hooks_fn) : nullptr;
  p->numel = f.numel;
  p->offset = f.offset;
  std::copy(f.back, f.back + 6, p->back);
  p->ndim = static_cast<uint8_t>(ndim);
  p->requires_grad = f.requires_grad;
  std::copy(f.dims, f.dims + 2 * ndim, p->dims);
  e->packed = p;
  return o;
}

Value* Machine::try_pack(Value* fn, Value* args) {
  const MarkAt at = last_tuple_at_;
  if (!named_global(fn, "torch._utils", "_rebuild_tensor_v2") || heap_.since(at.pos, fn)) return nullptr;
  if (mutations_ != at.mutations || out_.nested_loads.size() != at.nested || !heap_.can_rewind(at.pos)) return nullptr;
  PackForm f;
  if (!pack_form(args, f) || !pack_survivors(at, f)) return nullptr;
  const uint32_t depth = args->depth + 1;
  if (depth > lim_.pickle_depth) return nullptr;  // the call as unpacked fails there, with its message
  pack_rewind(at);
  return packed_call(fn, f, depth);
}

// The text of the string whose opcode (BINUNICODE or SHORT_BINUNICODE, checked when skimmed) is at `at`.
std::string_view Machine::str_at(uint64_t at) const {
  const uint8_t* d = c_.view().data();
  if (d[at] == 0x8c) return {reinterpret_cast<const char*>(d + at + 2), d[at + 1]};
  uint32_t n = 0;
  std::memcpy(&n, d + at + 1, 4);  // little-endian, as the hosts ckpt builds for
  return {reinterpret_cast<const char*>(d + at + 5), n};
}

std::optional<std::string_view> Machine::memo_str(uint64_t key) const {
  if (key >= memo_vec_.size() || memo_vec_[key] == nullptr) return std::nullopt;
  const Value* v = memo_vec_[key];
  if (is_unmade(v)) return str_at(unmade_at(v));
  if (v->kind == PKind::Str) return v->str();
  return std::nullopt;
}

// Where a skim started: what giving it up (skim_undo) puts back.
struct Machine::SkimStart {
  uint64_t pos;
  uint64_t op_at;
  uint64_t ops;
  uint64_t frame_end;
  size_t memo;
  bool framed;
  const char* op_name;
};

// Whether the next opcodes after the state's EMPTY_DICT are a memo put, then the key "_metadata" (written,
// or fetched from the memo).
bool Machine::metadata_follows() const {
  const ByteView& v = c_.view();
  const uint8_t* d = v.data();
  uint64_t at = c_.pos();
  if (have(v, at, 2) && d[at] == 'q') at += 2;
  else if (have(v, at, 5) && d[at] == 'r') at += 5;
  else if (have(v, at, 1) && d[at] == 0x94) at += 1;
  const bool written = (have(v, at, 11) && d[at] == 0x8c && d[at + 1] == kMetadata.size() &&
                        std::string_view(reinterpret_cast<const char*>(d + at + 2), kMetadata.size()) == kMetadata) ||
                       (have(v, at, 14) && d[at] == 'X' && d[at + 1] == kMetadata.size() && d[at + 2] == 0 && d[at + 3] == 0 &&
                        d[at + 4] == 0 &&
                        std::string_view(reinterpret_cast<const char*>(d + at + 5), kMetadata.size()) == kMetadata);
  const bool fetched = (have(v, at, 2) && d[at] == 'h' && memo_str(d[at + 1]) == kMetadata) ||
                       (have(v, at, 5) && d[at] == 'j' &&
                        memo_str(d[at + 1] | d[at + 2] << 8 | d[at + 3] << 16 | uint64_t{d[at + 4]} << 24) == kMetadata);
  return written || fetched;
}

// Gives a skim up: the cursor and the memo back at the EMPTY_DICT, which is read as usual, and so is the
// rest of the pickle. Returns false, skim_metadata's answer.
bool Machine::skim_undo(const SkimStart& s, uint64_t& ops) {
  memo_vec_.resize(s.memo);
  c_.seek(s.pos);
  op_at_ = s.op_at;
  op_name_ = s.op_name;
  ops = s.ops;
  frame_end_ = s.frame_end;
  out_.framed = s.framed;
  skim_off_ = true;
  return false;
}

// A memo put of the skimmed value on top: its real value, an unmade string or kDropped.
bool Machine::skim_put(uint64_t key) {
  if (skim_.empty() || skim_.back().kind == Skimmed::Mark || key != memo_vec_.size() || key >= (1ull << 26) ||
      memo_count() >= lim_.memo_entries)
    return false;
  const Skimmed& s = skim_.back();
  memo_vec_.push_back(s.real ? s.real : s.kind == Skimmed::Str ? unmade(s.at) : &kDropped);
  return true;
}

// A memo fetch: a string (made or not) or OrderedDict's global, else no skim.
bool Machine::skim_fetch(uint64_t key) {
  Value* m = key < memo_vec_.size() ? memo_vec_[key] : nullptr;
  if (!m) return false;
  if (is_unmade(m)) skim_.push_back({Skimmed::Str, str_at(unmade_at(m)) == kMetadata, false, nullptr, unmade_at(m)});
  else if (m->kind == PKind::Str && !m->ext) skim_.push_back({Skimmed::Str, m->str() == kMetadata, false, m});
  else if (ordered_global(m)) skim_.push_back({Skimmed::OrderedGlobal, false, false, m});
  else return false;
  return true;
}

// SETITEM(S) of skim_[k] -> skim_[k + 1] into skim_[t]: '_metadata' -> OrderedDict, str -> dict, str -> int
// (`deep`: an inner dict received an item).
bool Machine::skim_item(size_t t, size_t k, bool& deep) {
  using K = Skimmed::Kind;
  Skimmed& to = skim_[t];
  const K key = skim_[k].kind, val = skim_[k + 1].kind;
  if (key != K::Str) return false;
  if (to.kind == K::State && val == K::Ordered && skim_[k].metadata_key) return to.filled = true;
  if (to.kind == K::Ordered && val == K::Dict) return to.filled = true;
  if (to.kind == K::Dict && val == K::Int) return to.filled = deep = true;
  return false;
}

// SETITEMS: the pairs above the last MARK into the value under it.
bool Machine::skim_setitems(bool& deep) {
  size_t m = skim_.size();
  while (m > 0 && skim_[m - 1].kind != Skimmed::Mark) --m;
  if (m < 2 || (skim_.size() - m) % 2 != 0) return false;  // m - 1: the MARK; m - 2: the target
  for (size_t k = m; k < skim_.size(); k += 2)
    if (!skim_item(m - 2, k, deep)) return false;
  skim_.resize(m - 1);
  return true;
}

// The BUILD of the state dict, with the whole state read: an empty dict of the state's depth (4 when
// `deep`, else 3), made where the EMPTY_DICT at `state_at` was.
void Machine::skim_build(uint64_t state_at, bool deep) {
  op_name_ = "BUILD";
  ++mutations_;
  Value* target = stack_.back();
  use(target->callable(), kUseBuilt);
  Value* state = heap_.make(PKind::Dict, state_at);
  state->depth = deep ? 4 : 3;
  heap_.ext(target)->state = state;
  note_child(target, state);
}

// Packing, at an EMPTY_DICT on top of a state dict of packed tensors: torch.save's module versions, the
// OrderedDict's BUILD state after its last tensor,
//   {'_metadata': OrderedDict([('', {'version': 1}), ('fc', {'version': 1}), ...])}
// are read opcode by opcode without making their values (more than a third of a state dict's graph, and
// read by nothing: an OrderedDict is its items). The strings the memo keeps are noted where their
// opcodes are (unmade: made when fetched), the containers as kDropped (a fetch reads the pickle again
// unpacked). The BUILD then gets an empty dict of the state's depth, and the OrderedDict's global is used
// as it would have been. Anything else on the way (another opcode, shape or memo key, the limits) gives
// up: the cursor and the memo go back to the EMPTY_DICT, which is read as usual, and so is the rest.
bool Machine::skim_metadata(uint64_t& ops) {
  // (a depth limit under the state's 4 levels is met where reading it in full meets it)
  if (file_ || stack_.size() <= floor() || lim_.pickle_depth < 4) return false;
  const Value* od = stack_.back();
  if (od->kind != PKind::Object || !ordered_global(od->callable()) || od->ext->state) return false;
  const Kids& items = od->ext->dict;
  if (items.empty() || !items[items.size() - 1]->packed() || !metadata_follows()) return false;

  const SkimStart start{c_.pos(), op_at_, ops, frame_end_, memo_vec_.size(), out_.framed, op_name_};
  auto give_up = [&] { return skim_undo(start, ops); };
  const ByteView& v = c_.view();
  const uint8_t* d = v.data();
  using K = Skimmed::Kind;
  std::vector<Skimmed>& st = skim_;
  st.assign(1, Skimmed{K::State});
  bool deep = false;  // an inner dict received an item: the state is 4 deep, else 3 or less
  size_t marks = 0;  // MARKs open on `st`
  for (;;) {
    const uint64_t at = c_.pos();
    op_at_ = at;
    // The limits: where one is near, reading in full says which, where.
    if (++ops > lim_.pickle_ops || !have(v, at, 1) || stack_.size() + st.size() + 1 >= lim_.pickle_depth * 64 + 1024)
      return give_up();
    const uint8_t op = d[at];
    uint64_t next = at + 1;
    switch (op) {
      case '(':
        if (marks_.size() + marks++ >= lim_.pickle_depth) return give_up();
        st.push_back({K::Mark});
        break;
      case '}': st.push_back({K::Dict}); break;
      case ')': st.push_back({K::EmptyTuple}); break;
      case 'K':
      case 'M':
      case 'J':
        next += op == 'K' ? 1 : op == 'M' ? 2 : 4;
        if (!have(v, at, next - at)) return give_up();
        st.push_back({K::Int});
        break;
      case 0x8c:
      case 'X': {
        const uint64_t len_bytes = op == 'X' ? 4 : 1;
        if (!have(v, at, 1 + len_bytes)) return give_up();
        const uint64_t n = op == 'X' ? le32(d + at + 1) : d[at + 1];
        next += len_bytes + n;
        if (n > lim_.string_bytes || !have(v, at, next - at)) return give_up();
        st.push_back({K::Str, std::string_view(reinterpret_cast<const char*>(d + at + 1 + len_bytes), n) == kMetadata, false,
                      nullptr, at});
        break;
      }
      case 'q':
      case 'r':
      case 0x94:
        next += op == 'q' ? 1 : op == 'r' ? 4 : 0;
        if (!have(v, at, next - at) || !skim_put(op == 'q' ? d[at + 1] : op == 'r' ? le32(d + at + 1) : memo_count()))
          return give_up();
        break;
      case 'h':
      case 'j':
        next += op == 'h' ? 1 : 4;
        if (!have(v, at, next - at) || !skim_fetch(op == 'h' ? d[at + 1] : le32(d + at + 1))) return give_up();
        break;
      case 0x95: {  // FRAME, parsing bytes: a length that must fit
        if (!have(v, at, 9)) return give_up();
        uint64_t n = 0;
        std::memcpy(&n, d + at + 1, 8);
        next += 8;
        if (n > v.size() - next) return give_up();
        frame_end_ = next + n;
        out_.framed = true;
        break;
      }
      case 'R':  // OrderedDict()
        if (st.size() < 2 || st.back().kind != K::EmptyTuple || st[st.size() - 2].kind != K::OrderedGlobal) return give_up();
        op_name_ = "REDUCE";
        use(st[st.size() - 2].real, kUseCalled);
        st.pop_back();
        st.back() = {K::Ordered};
        break;
      case 's':
        if (st.size() < 3 || !skim_item(st.size() - 3, st.size() - 2, deep)) return give_up();
        st.resize(st.size() - 2);
        break;
      case 'u':
        if (!skim_setitems(deep)) return give_up();
        --marks;
        break;
      case 'b':  // BUILD of the state dict with the whole state read
        if (st.size() != 1 || !st[0].filled) return give_up();
        c_.seek(next);
        skim_build(start.op_at, deep);
        return true;
      default: return give_up();
    }
    c_.seek(next);
  }
}

}  // namespace ckpt::pickle_detail
