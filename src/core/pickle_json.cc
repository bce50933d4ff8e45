// plain_json: a pickled value as plain JSON (metadata, hyper-parameters, extra state).
#include <fmt/format.h>

#include <algorithm>

#include "core/pickle.h"

namespace ckpt {

namespace {

size_t utf8_code_points(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

struct PlainWalker {
  const PlainHook& hook;
  int max_depth;
  uint64_t budget;
  std::vector<const Value*> path;

  nlohmann::ordered_json operator()(const Value* v, int depth) {
    using J = nlohmann::ordered_json;
    if (depth > max_depth || budget == 0) return J("...");
    --budget;
    if (std::find(path.begin(), path.end(), v) != path.end()) return J("<cycle>");
    if (hook)
      if (auto h = hook(v)) return *h;
    path.push_back(v);
    J out = convert(v, depth);
    path.pop_back();
    return out;
  }

  nlohmann::ordered_json convert(const Value* v, int depth) {
    using J = nlohmann::ordered_json;
    auto key_text = [&](const Value* k) {
      if (k->is_str()) return std::string(k->str());
      if (k->is_int()) return std::to_string(k->i);
      return (*this)(k, depth + 1).dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    };
    auto object_of = [&](const Kids& pairs) {
      J o = J::object();
      for (size_t k = 0; k + 1 < pairs.size(); k += 2) o[key_text(pairs[k])] = (*this)(pairs[k + 1], depth + 1);
      return o;
    };
    switch (v->kind) {
      case PKind::None: return nullptr;
      case PKind::Bool: return v->b;
      case PKind::Int: return v->i;
      case PKind::BigInt: return bigint_decimal(v);
      case PKind::Float: return v->f;
      case PKind::Str: return std::string(v->str());
      case PKind::Bytes: return J(fmt::format("<{} bytes>", v->str().size()));
      case PKind::Global: return J{{"__global__", v->qualified()}};
      case PKind::PersId: return J("<persistent id>");
      case PKind::Tuple:
      case PKind::List:
      case PKind::Set:
      case PKind::FrozenSet: {
        J a = J::array();
        for (const Value* e : v->kids()) a.push_back((*this)(e, depth + 1));
        return a;
      }
      case PKind::Dict: return object_of(v->kids());
      case PKind::Object: break;
    }
    std::string q = v->qualified();
    const Value* a = v->args();
    const Value* a0 = a && a->kind == PKind::Tuple && !a->kids().empty() ? a->kids()[0] : nullptr;
    if (q == "collections.OrderedDict" || q == "builtins.dict") return object_of(v->pairs());
    if ((q == "builtins.set" || q == "builtins.frozenset" || q == "builtins.list" || q == "builtins.tuple")) {
      if (!a0) return J::array();
      return (*this)(a0, depth + 1);
    }
    if (q == "_codecs.encode" && a0 && a0->is_str()) return J(fmt::format("<{} bytes>", utf8_code_points(a0->str())));
    if ((q == "builtins.bytes" || q == "builtins.bytearray") && !a0) return J("<0 bytes>");
    if ((q == "builtins.bytes" || q == "builtins.bytearray") && a0 && a0->kind == PKind::Bytes) return (*this)(a0, depth + 1);
    // TorchScript's list builders and type tags wrap a plain value.
    if (a0 && (q.rfind("torch.jit._pickle.build_", 0) == 0 || q == "torch.jit._pickle.restore_type_tag"))
      return (*this)(a0, depth + 1);
    if (q == "copyreg._reconstructor" && a0) q = a0->qualified();
    J o = J::object();
    o["__class__"] = q.empty() ? "?" : q;
    if (const Value* st = v->state(); st && st->kind == PKind::Dict) {
      for (size_t k = 0; k + 1 < st->kids().size(); k += 2)
        if (st->kids()[k]->is_str()) o[std::string(st->kids()[k]->str())] = (*this)(st->kids()[k + 1], depth + 1);
    }
    return o;
  }
};

}  // namespace

nlohmann::ordered_json plain_json(const Value* v, const PlainHook& hook, int max_depth, uint64_t budget) {
  PlainWalker w{hook, max_depth, budget, {}};
  return w(v, 0);
}


}  // namespace ckpt
