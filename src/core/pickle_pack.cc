// Machine's packing of torch.save's _rebuild_tensor_v2 calls into a few fields as they are read, and its
// skim of a state dict's _metadata (pickle_machine.h).
#include "core/pickle_machine.h"

namespace ckpt::pickle_detail {

Value* Machine::try_pack(Value* fn, Value* args) {
  const MarkAt at = last_tuple_at_;
  auto global_is = [&](const Value* g, std::string_view m, std::string_view n) {
    return g->kind == PKind::Global && g->str() == m && g->name() == n && !out_.globals[static_cast<size_t>(g->ext->global)].computed;
  };
  auto plain = [](const Value* v, PKind k) { return v->kind == k && v->ext == nullptr; };
  if (!global_is(fn, "torch._utils", "_rebuild_tensor_v2") || heap_.since(at.pos, fn)) return nullptr;
  if (mutations_ != at.mutations || out_.nested_loads.size() != at.nested || !heap_.can_rewind(at.pos)) return nullptr;
  if (!plain(args, PKind::Tuple) || args->kids().size() != 6) return nullptr;
  const Kids& a = args->kids();
  const Value* pers = a[0];
  if (pers->kind != PKind::PersId || !pers->ext || pers->ext->callable || pers->ext->kwargs || pers->ext->state ||
      !pers->ext->dict.empty() || !pers->kids().empty() || !pers->ext->args)
    return nullptr;
  const Value* pid = pers->ext->args;
  if (!plain(pid, PKind::Tuple) || pid->kids().size() != 5) return nullptr;
  Value* word = pid->kids()[0];
  Value* cls = pid->kids()[1];
  Value* key = pid->kids()[2];
  Value* loc = pid->kids()[3];
  const Value* numel = pid->kids()[4];
  if (!word->is_str() || word->str() != "storage" || cls->kind != PKind::Global || out_.globals[static_cast<size_t>(cls->ext->global)].computed ||
      !key->is_str() || !loc->is_str() || !plain(numel, PKind::Int))
    return nullptr;
  const Value* offset = a[1];
  const Value* size = a[2];
  const Value* stride = a[3];
  const Value* grad = a[4];
  const Value* hooks = a[5];
  if (!plain(offset, PKind::Int) || !plain(size, PKind::Tuple) || !plain(stride, PKind::Tuple) || !plain(grad, PKind::Bool))
    return nullptr;
  const size_t ndim = size->kids().size();
  if (ndim != stride->kids().size() || ndim > 64) return nullptr;
  for (size_t k = 0; k < ndim; ++k)
    if (!plain(size->kids()[k], PKind::Int) || !plain(stride->kids()[k], PKind::Int)) return nullptr;
  Value* hooks_fn = nullptr;
  if (hooks->kind == PKind::Object) {
    const ObjExt* e = hooks->ext;
    if (hooks->how != ObjHow::Reduce || !hooks->kids().empty() || !e || !e->callable || !global_is(e->callable, "collections", "OrderedDict") ||
        !e->args || !plain(e->args, PKind::Tuple) || !e->args->kids().empty() || e->kwargs || e->state || !e->dict.empty() || e->packed)
      return nullptr;
    hooks_fn = e->callable;
  } else if (!plain(hooks, PKind::Dict) || !hooks->kids().empty()) {
    return nullptr;
  }
  const Value* located[6] = {args, pid, pers, size, stride, hooks};
  uint32_t back[6];
  for (size_t k = 0; k < 6; ++k) {
    if (located[k]->offset > op_at_ || op_at_ - located[k]->offset > UINT32_MAX) return nullptr;
    back[k] = static_cast<uint32_t>(op_at_ - located[k]->offset);
  }
  // Values to keep: the packed call's scalars and the memo's, when made since the MARK. Each is copied out
  // (with its ext: a Global's name) before the rewind and allocated again after it.
  std::vector<Kept>& kept = kept_;
  kept.clear();
  auto keep = [&](Value* v) -> bool {
    if (!heap_.since(at.pos, v)) return true;
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
    for (const Kept& k : kept)
      if (k.from == v) return true;
    if (kept.size() == 32 || (v->ext && (v->ext->state || !v->ext->dict.empty()))) return false;
    kept.push_back({v, *v, v->ext ? *v->ext : ObjExt(), nullptr});
    return true;
  };
  for (Value* v : {word, cls, key, loc, hooks_fn})
    if (v && !keep(v)) return nullptr;
  std::vector<PackSlot>& slots = pack_slots_;
  slots.clear();
  for (size_t k = at.memo_log; k < memo_log_.size(); ++k) {
    Value** slot = memo_slot(memo_log_[k]);
    if (!slot || !*slot || is_unmade(*slot) || !heap_.since(at.pos, *slot)) continue;
    const bool kept_value = keep(*slot);
    if (!kept_value && kept.size() == 32) return nullptr;
    slots.push_back({slot, kept_value});
  }
  // The one-per-pickle nodes (small ints, None, bools, the empty tuple) made since the MARK: their copy
  // when the memo keeps one, else made again when next needed.
  std::vector<Cache>& caches = caches_;
  caches.clear();
  for (size_t k = at.caches; k < cache_log_.size(); ++k)
    if (Value*& c = *cache_log_[k]; c && heap_.since(at.pos, c)) caches.push_back({&c, c});
  const int64_t numel_v = numel->i, offset_v = offset->i;
  const bool grad_v = grad->b;
  int64_t dims[128];
  for (size_t k = 0; k < ndim; ++k) {
    dims[k] = size->kids()[k]->i;
    dims[ndim + k] = stride->kids()[k]->i;
  }
  const uint32_t depth = args->depth + 1;
  if (depth > lim_.pickle_depth) return nullptr;  // the call as unpacked fails there, with its message

  heap_.rewind(at.pos);
  auto moved = [&](Value* v) -> Value* {
    for (const Kept& k : kept)
      if (k.from == v) return k.to;
    return v;
  };
  for (Kept& kp : kept) {
    kp.to = heap_.make(kp.v.kind, kp.v.offset);
    *kp.to = kp.v;
    if (kp.v.ext) {
      kp.to->ext = nullptr;
      *heap_.ext(kp.to) = kp.e;
    }
  }
  for (const PackSlot& s : slots) *s.slot = s.keep ? moved(*s.slot) : &kDropped;
  for (const Cache& c : caches) {
    Value* to = moved(c.was);
    *c.at = to == c.was ? nullptr : to;
  }
  memo_log_.resize(at.memo_log);
  cache_log_.resize(at.caches);

  Value* o = make(PKind::Object);
  o->how = ObjHow::Reduce;
  o->depth = depth;
  ObjExt* e = heap_.ext(o);
  e->callable = fn;
  auto* p = new (heap_.alloc(sizeof(PackedTensor) + sizeof(int64_t) * (ndim ? 2 * ndim - 1 : 0), alignof(PackedTensor))) PackedTensor();
  p->heap = &heap_;
  p->reduce_at = op_at_;
  p->storage_word = moved(word);
  p->cls = moved(cls);
  p->key = moved(key);
  p->location = moved(loc);
  p->hooks_fn = hooks_fn ? moved(hooks_fn) : nullptr;
  p->numel = numel_v;
  p->offset = offset_v;
  std::copy(back, back + 6, p->back);
  p->ndim = static_cast<uint8_t>(ndim);
  p->requires_grad = grad_v;
  std::copy(dims, dims + 2 * ndim, p->dims);
  e->packed = p;
  return o;
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
  auto ordered_global = [&](const Value* g) {
    return g && g->kind == PKind::Global && g->str() == "collections" && g->name() == "OrderedDict" &&
           !out_.globals[static_cast<size_t>(g->ext->global)].computed;
  };
  if (od->kind != PKind::Object || !ordered_global(od->callable()) || od->ext->state) return false;
  const Kids& items = od->ext->dict;
  if (items.empty() || !items[items.size() - 1]->packed()) return false;
  // The next opcodes: a memo put, then the key "_metadata" (written, or fetched from the memo).
  const ByteView& v = c_.view();
  const uint8_t* d = v.data();
  uint64_t at = c_.pos();
  auto have = [&](uint64_t n) { return at <= v.size() && n <= v.size() - at; };
  if (have(2) && d[at] == 'q') at += 2;
  else if (have(5) && d[at] == 'r') at += 5;
  else if (have(1) && d[at] == 0x94) at += 1;
  constexpr std::string_view kKey = "_metadata";
  const bool written = (have(11) && d[at] == 0x8c && d[at + 1] == kKey.size() &&
                        std::string_view(reinterpret_cast<const char*>(d + at + 2), kKey.size()) == kKey) ||
                       (have(14) && d[at] == 'X' && d[at + 1] == kKey.size() && d[at + 2] == 0 && d[at + 3] == 0 && d[at + 4] == 0 &&
                        std::string_view(reinterpret_cast<const char*>(d + at + 5), kKey.size()) == kKey);
  const bool fetched = (have(2) && d[at] == 'h' && memo_str(d[at + 1]) == kKey) ||
                       (have(5) && d[at] == 'j' && memo_str(d[at + 1] | d[at + 2] << 8 | d[at + 3] << 16 | uint64_t{d[at + 4]} << 24) == kKey);
  if (!written && !fetched) return false;

  const uint64_t start = c_.pos(), state_at = op_at_, ops_at = ops, frame_end = frame_end_;
  const size_t memo_at = memo_vec_.size();
  const bool framed = out_.framed;
  const char* name = op_name_;
  auto give_up = [&] {
    memo_vec_.resize(memo_at);
    c_.seek(start);
    op_at_ = state_at;
    op_name_ = name;
    ops = ops_at;
    frame_end_ = frame_end;
    out_.framed = framed;
    skim_off_ = true;
    return false;
  };
  using K = Skimmed::Kind;
  std::vector<Skimmed>& st = skim_;
  st.assign(1, Skimmed{K::State});
  bool deep = false;  // an inner dict received an item: the state is 4 deep, else 3 or less
  size_t marks = 0;  // MARKs open on `st`
  auto put = [&](uint64_t key) -> bool {
    if (st.empty() || st.back().kind == K::Mark || key != memo_vec_.size() || key >= (1ull << 26) || memo_count() >= lim_.memo_entries)
      return false;
    const Skimmed& s = st.back();
    memo_vec_.push_back(s.real ? s.real : s.kind == K::Str ? unmade(s.at) : &kDropped);
    return true;
  };
  // SETITEM(S) of st[k] -> st[k + 1] into st[t]: '_metadata' -> OrderedDict, str -> dict, str -> int.
  auto item = [&](size_t t, size_t k) {
    Skimmed& to = st[t];
    const K key = st[k].kind, val = st[k + 1].kind;
    if (key != K::Str) return false;
    if (to.kind == K::State && val == K::Ordered && st[k].metadata_key) return to.filled = true;
    if (to.kind == K::Ordered && val == K::Dict) return to.filled = true;
    if (to.kind == K::Dict && val == K::Int) return to.filled = deep = true;
    return false;
  };
  auto le32 = [&](uint64_t p) {
    uint32_t x = 0;
    std::memcpy(&x, d + p, 4);  // little-endian, as every host ckpt builds for
    return x;
  };
  for (;;) {
    at = c_.pos();
    op_at_ = at;
    // The limits: where one is near, reading in full says which, where.
    if (++ops > lim_.pickle_ops || !have(1) || stack_.size() + st.size() + 1 >= lim_.pickle_depth * 64 + 1024) return give_up();
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
        if (!have(next - at)) return give_up();
        st.push_back({K::Int});
        break;
      case 0x8c:
      case 'X': {
        const uint64_t len_bytes = op == 'X' ? 4 : 1;
        if (!have(1 + len_bytes)) return give_up();
        const uint64_t n = op == 'X' ? le32(at + 1) : d[at + 1];
        next += len_bytes + n;
        if (n > lim_.string_bytes || !have(next - at)) return give_up();
        st.push_back({K::Str, std::string_view(reinterpret_cast<const char*>(d + at + 1 + len_bytes), n) == kKey, false, nullptr, at});
        break;
      }
      case 'q':
      case 'r':
      case 0x94: {
        next += op == 'q' ? 1 : op == 'r' ? 4 : 0;
        if (!have(next - at) || !put(op == 'q' ? d[at + 1] : op == 'r' ? le32(at + 1) : memo_count())) return give_up();
        break;
      }
      case 'h':
      case 'j': {
        next += op == 'h' ? 1 : 4;
        if (!have(next - at)) return give_up();
        const uint64_t key = op == 'h' ? d[at + 1] : le32(at + 1);
        Value* m = key < memo_vec_.size() ? memo_vec_[key] : nullptr;
        if (!m) return give_up();
        if (is_unmade(m)) st.push_back({K::Str, str_at(unmade_at(m)) == kKey, false, nullptr, unmade_at(m)});
        else if (m->kind == PKind::Str && !m->ext) st.push_back({K::Str, m->str() == kKey, false, m});
        else if (ordered_global(m)) st.push_back({K::OrderedGlobal, false, false, m});
        else return give_up();
        break;
      }
      case 0x95: {  // FRAME, parsing bytes: a length that must fit
        if (!have(9)) return give_up();
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
        if (st.size() < 3 || !item(st.size() - 3, st.size() - 2)) return give_up();
        st.resize(st.size() - 2);
        break;
      case 'u': {
        size_t m = st.size();
        while (m > 0 && st[m - 1].kind != K::Mark) --m;
        if (m < 2 || (st.size() - m) % 2 != 0) return give_up();  // m - 1: the MARK; m - 2: the target
        for (size_t k = m; k < st.size(); k += 2)
          if (!item(m - 2, k)) return give_up();
        st.resize(m - 1);
        --marks;
        break;
      }
      case 'b': {  // BUILD of the state dict with the whole state read
        if (st.size() != 1 || !st[0].filled) return give_up();
        c_.seek(next);
        op_name_ = "BUILD";
        ++mutations_;
        Value* target = stack_.back();
        use(target->callable(), kUseBuilt);
        Value* state = heap_.make(PKind::Dict, state_at);
        state->depth = deep ? 4 : 3;
        heap_.ext(target)->state = state;
        note_child(target, state);
        return true;
      }
      default: return give_up();
    }
    c_.seek(next);
  }
}

}  // namespace ckpt::pickle_detail
