#include "core/torchscript.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <unordered_map>
#include <unordered_set>

#include "core/torch_pickle.h"

namespace ckpt {
namespace {

bool is_ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Every "..." or '...' string inside a `[ ... ]` list literal.
std::vector<std::string> quoted_list(std::string_view s) {
  std::vector<std::string> out;
  for (size_t k = 0; k < s.size(); ++k) {
    if (s[k] != '"' && s[k] != '\'') continue;
    const size_t end = s.find(s[k], k + 1);
    if (end == std::string_view::npos) break;
    out.emplace_back(s.substr(k + 1, end - k - 1));
    k = end;
  }
  return out;
}

size_t indent_of(std::string_view line) {
  size_t n = 0;
  while (n < line.size() && line[n] == ' ') ++n;
  return n;
}

// Method names called on self: "(self).name(" and "self.name(".
void self_calls(std::string_view line, std::vector<std::string>& out) {
  for (std::string_view pat : {std::string_view("(self)."), std::string_view("self.")}) {
    for (size_t at = line.find(pat); at != std::string_view::npos; at = line.find(pat, at + 1)) {
      if (pat[0] == 's' && at > 0 && (is_ident_char(line[at - 1]) || line[at - 1] == '(' || line[at - 1] == '.')) continue;
      size_t k = at + pat.size(), start = k;
      while (k < line.size() && is_ident_char(line[k])) ++k;
      if (k > start && k < line.size() && line[k] == '(') {
        std::string name(line.substr(start, k - start));
        if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(std::move(name));
      }
    }
  }
}

std::string short_type(std::string_view qualified) {
  std::string s(qualified.substr(qualified.rfind('.') == std::string_view::npos ? 0 : qualified.rfind('.') + 1));
  for (size_t at = s.find("___torch_mangle_"); at != std::string::npos; at = s.find("___torch_mangle_")) {
    size_t end = at + 16;
    while (end < s.size() && std::isdigit(static_cast<unsigned char>(s[end]))) ++end;
    s.erase(at, end - at);
  }
  return s;
}

}  // namespace

std::vector<TsClass> parse_torchscript_code(std::string_view module, std::string_view source) {
  std::vector<TsClass> classes;
  TsClass* cls = nullptr;
  TsMethod* method = nullptr;
  size_t pos = 0;
  uint32_t lineno = 0;
  while (pos <= source.size()) {
    ++lineno;
    size_t nl = source.find('\n', pos);
    if (nl == std::string_view::npos) nl = source.size();
    std::string_view line = source.substr(pos, nl - pos);
    pos = nl + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    const size_t ind = indent_of(line);
    if (ind == 0) {
      cls = nullptr;
      method = nullptr;
      if (line.substr(0, 6) == "class ") {
        const size_t open = line.find('('), colon = line.rfind(':');
        const size_t name_end = std::min(open, colon);
        if (name_end == std::string_view::npos || name_end <= 6) continue;
        TsClass c;
        c.qualified = std::string(module) + "." + std::string(line.substr(6, name_end - 6));
        if (open != std::string_view::npos) {
          const size_t close = line.find(')', open);
          if (close != std::string_view::npos) c.base = std::string(line.substr(open + 1, close - open - 1));
        }
        classes.push_back(std::move(c));
        cls = &classes.back();
      }
      continue;
    }
    if (!cls) continue;
    if (ind == 2) {
      method = nullptr;
      std::string_view body = line.substr(2);
      if (body.substr(0, 14) == "__parameters__") {
        cls->parameters = quoted_list(body.substr(14));
      } else if (body.substr(0, 11) == "__buffers__") {
        cls->buffers = quoted_list(body.substr(11));
      } else if (body.substr(0, 17) == "__annotations__[\"") {
        const size_t end = body.find("\"]", 17);
        const size_t eq = body.find("= ", end == std::string_view::npos ? 0 : end);
        if (end != std::string_view::npos && eq != std::string_view::npos)
          cls->attributes.emplace_back(std::string(body.substr(17, end - 17)), std::string(body.substr(eq + 2)));
      } else if (body.substr(0, 4) == "def ") {
        const size_t open = body.find('(');
        if (open == std::string_view::npos || open <= 4) continue;
        cls->methods.push_back(TsMethod{std::string(body.substr(4, open - 4)), {}, {}});
        method = &cls->methods.back();
      } else {
        const size_t colon = body.find(" : ");
        if (colon != std::string_view::npos && colon > 0 &&
            std::all_of(body.begin(), body.begin() + static_cast<std::ptrdiff_t>(colon), is_ident_char)) {
          std::string_view type = body.substr(colon + 3);
          if (auto eq = type.find(" = "); eq != std::string_view::npos) type = type.substr(0, eq);
          cls->attributes.emplace_back(std::string(body.substr(0, colon)), std::string(type));
        }
      }
      continue;
    }
    if (method) {
      self_calls(line, method->self_calls);
      method->body.emplace_back(lineno, std::string(line.substr(ind)));
    }
  }
  return classes;
}

namespace {

class TsReader {
 public:
  TsReader(Checkpoint& ck, const ZipReader& zip, const std::string& prefix, const Limits& lim)
      : ck_(ck), zip_(zip), pre_(prefix + "/"), lim_(lim) {}

  void run() {
    parse_code();
    const ZipEntry* pkl_entry = zip_.find(pre_ + "data.pkl");
    ByteView pkl = zip_.stored(*pkl_entry);
    Unpickled u = unpickle(pkl, 0, *ck_.heap, lim_);
    ck_.pickle_protocol = u.protocol;
    ck_.globals = std::move(u.globals);
    ck_.globals_from = u.framed ? nullptr : pkl.data();  // framed: the scan parses it as a file too
    ck_.globals_main = ck_.globals.size();
    TorchInterpreter interp(ck_, pkl, lim_, zip_storage_locator(zip_, pre_ + "data/", pkl));
    interp_ = &interp;
    if (!is_object(u.root)) pkl.fail(u.root->offset, "TorchScript data.pkl does not hold a module object");
    walk(u.root, "", 0, pkl);
    interp_ = nullptr;
    constants();
    methods(u.root);
    extras();
    ck_.content = Content::Module;
    ck_.split_inferred = false;
  }

 private:
  static bool is_object(const Value* v) {
    return v && v->kind == PKind::Object && v->callable() && v->callable()->kind == PKind::Global;
  }

  void parse_code() {
    const std::string code = pre_ + "code/";
    for (const ZipEntry& e : zip_.entries()) {
      std::string_view name = e.name;
      if (name.substr(0, code.size()) != code || name.size() < code.size() + 3 || name.substr(name.size() - 3) != ".py") continue;
      std::string module(name.substr(code.size(), name.size() - code.size() - 3));
      std::replace(module.begin(), module.end(), '/', '.');
      std::string storage;
      ByteView src = zip_.content(e, &storage, lim_.inflate_bytes);
      for (TsClass& c : parse_torchscript_code(module, src.str(0, src.size()))) {
        c.file = std::string(name.substr(pre_.size()));
        ck_.ts_classes.push_back(c);
        classes_.emplace(c.qualified, std::move(c));
      }
    }
  }

  const TsClass* class_of(const Value* obj) const {
    auto it = classes_.find(obj->qualified());
    return it == classes_.end() ? nullptr : &it->second;
  }

  bool is_module_object(const Value* v) const {
    if (!is_object(v) || v->callable()->s.substr(0, 9) != "__torch__") return false;
    if (const TsClass* c = class_of(v)) return c->is_module();
    const Value* st = v->state();
    return st && st->kind == PKind::Dict && st->get("training") != nullptr;
  }

  void walk(const Value* obj, const std::string& path, int depth, const ByteView& pkl) {
    if (depth > static_cast<int>(lim_.pickle_depth)) pkl.fail(obj->offset, "modules nest deeper than the limit");
    Module m;
    m.name = path;
    m.qualified_type = obj->qualified();
    m.type = short_type(m.qualified_type);
    const Value* st = obj->state();
    if (st && st->kind == PKind::Dict)
      if (const Value* tr = st->get("training"); tr && tr->kind == PKind::Bool) m.training = tr->b;
    // The same module object at a second path: listed (its entries too, as state_dict() would), and
    // marked so that module counts take it once. A module that contains itself stops here.
    auto seen = first_path_.find(obj);
    if (seen != first_path_.end()) m.shared_with = seen->second;
    else first_path_.emplace(obj, path);
    ck_.modules.push_back(std::move(m));
    const size_t index = ck_.modules.size() - 1;
    if (!on_path_.insert(obj).second) return;
    struct Leave {
      std::unordered_set<const Value*>& s;
      const Value* v;
      ~Leave() { s.erase(v); }
    } leave{on_path_, obj};
    if (!st || st->kind != PKind::Dict) return;  // __getstate__ classes: opaque state
    const TsClass* cls = class_of(obj);
    auto has = [](const std::vector<std::string>& v, std::string_view k) { return std::find(v.begin(), v.end(), k) != v.end(); };
    const auto& p = st->items;
    for (size_t k = 0; k + 1 < p.size(); k += 2) {
      if (!p[k]->is_str()) continue;
      const std::string key(p[k]->s);
      const Value* v = p[k + 1];
      if (interp_->is_tensor(v)) {
        if (ck_.tensors.size() >= lim_.tensors) pkl.fail(v->offset, fmt::format("more than {} tensors", lim_.tensors));
        Tensor t = interp_->tensor(v, join_path(path, key));
        const bool param = cls ? has(cls->parameters, key) : t.requires_grad;
        t.kind = param ? TensorKind::Parameter : TensorKind::Buffer;
        t.is_parameter_object = param;
        t.kind_inferred = cls == nullptr;
        ck_.tensors.push_back(std::move(t));
      } else if (is_module_object(v)) {
        walk(v, join_path(path, key), depth + 1, pkl);
      } else if (key != "training" && key != "_is_full_backward_hook") {
        ck_.modules[index].attributes[key] = plain_json(v, nullptr, 8, 1000);
      }
    }
  }

  // constants.pkl: a tuple of constants; tensors there are weights frozen into the code.
  void constants() {
    const ZipEntry* e = zip_.find(pre_ + "constants.pkl");
    if (!e) return;
    ByteView pkl = zip_.stored(*e);
    Unpickled u = unpickle(pkl, 0, *ck_.heap, lim_);
    for (auto& g : u.globals) ck_.globals.push_back(std::move(g));
    // Constants are not model entries; their storages still count in the file.
    TorchInterpreter interp(ck_, pkl, lim_, zip_storage_locator(zip_, pre_ + "constants/", pkl));
    interp.set_in_model(false);
    TsConstants cs;
    cs.count = u.root->items.size();
    if (u.root->kind == PKind::Tuple || u.root->kind == PKind::List) {
      for (size_t k = 0; k < u.root->items.size(); ++k) {
        const Value* c = u.root->items[k];
        TsConstant item;
        item.name = fmt::format("c{}", k);  // code/ refers to it as CONSTANTS.c<k>
        if (!interp.is_tensor(c)) {
          item.value = plain_json(c, nullptr, 4, 1000);
          cs.items.push_back(std::move(item));
          continue;
        }
        Tensor t = interp.tensor(c, item.name);
        ++cs.tensors;
        cs.elements += static_cast<uint64_t>(t.numel);
        cs.bytes += t.bytes;
        item.is_tensor = true;
        item.dtype = t.dtype ? std::string(t.dtype->name) : "?";
        item.shape = t.shape;
        item.numel = t.numel;
        cs.items.push_back(std::move(item));
      }
    }
    const uint64_t tensors = cs.tensors, elements = cs.elements, bytes = cs.bytes;
    ck_.torchscript.constants = std::move(cs);
    uint64_t model_params = 0;
    for (const Tensor& t : ck_.tensors) model_params += t.kind == TensorKind::Parameter;
    const bool frozen = tensors > 0 && model_params == 0;
    ck_.torchscript.frozen = frozen;
    if (frozen) ck_.frozen.push_back({tensors, elements, bytes});
  }

  // Every compiled method of the root, whether forward reaches it, and whether it is an entry point
  // (reachable from no other method: @torch.jit.export and the like).
  void methods(const Value* root) {
    const TsClass* cls = class_of(root);
    std::vector<TsMethodInfo> out;
    if (cls) {
      std::unordered_map<std::string, const TsMethod*> by_name;
      std::unordered_set<std::string> called;
      for (const TsMethod& m : cls->methods) {
        by_name.emplace(m.name, &m);
        for (const std::string& c : m.self_calls)
          if (c != m.name) called.insert(c);
      }
      std::unordered_set<std::string> from_forward;
      std::deque<std::string> todo{"forward"};
      while (!todo.empty()) {
        std::string n = todo.front();
        todo.pop_front();
        auto it = by_name.find(n);
        if (it == by_name.end() || !from_forward.insert(n).second) continue;
        for (const std::string& c : it->second->self_calls) todo.push_back(c);
      }
      for (const TsMethod& m : cls->methods) {
        const bool reach = from_forward.count(m.name) > 0;
        const bool entry = m.name != "forward" && !reach && !called.count(m.name) && m.name.substr(0, 2) != "__";
        out.push_back(TsMethodInfo{m.name, reach, entry, m.self_calls});
      }
    }
    ck_.torchscript.methods = std::move(out);
  }

  void extras() {
    const std::string extra = pre_ + "extra/";
    for (const ZipEntry& e : zip_.entries())
      if (e.name.substr(0, extra.size()) == extra)
        ck_.torchscript.extra_files.push_back(TsExtraFile{std::string(e.name.substr(extra.size())), e.uncompressed_size});
    ck_.torchscript.mobile = zip_.find(pre_ + "bytecode.pkl") != nullptr;
  }

  Checkpoint& ck_;
  const ZipReader& zip_;
  const std::string pre_;
  const Limits& lim_;
  std::unordered_map<std::string, TsClass> classes_;
  std::unordered_map<const Value*, std::string> first_path_;
  std::unordered_set<const Value*> on_path_;
  TorchInterpreter* interp_ = nullptr;
};

}  // namespace

void read_torchscript(Checkpoint& ck, const ZipReader& zip, const std::string& prefix, const Limits& limits) {
  if (!ck.heap) ck.heap = std::make_shared<Heap>();
  TsReader(ck, zip, prefix, limits).run();
}

}  // namespace ckpt
