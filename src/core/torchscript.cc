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

// Splits "a, (b, c), d" at its top-level commas.
std::vector<std::string_view> top_level_items(std::string_view s) {
  std::vector<std::string_view> out;
  int nest = 0;
  size_t start = 0;
  for (size_t k = 0; k <= s.size(); ++k) {
    const char c = k < s.size() ? s[k] : ',';
    if (c == '(' || c == '[' || c == '{') ++nest;
    else if (c == ')' || c == ']' || c == '}') --nest;
    else if (c == ',' && nest == 0) {
      std::string_view item = s.substr(start, k - start);
      while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
      while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
      if (!item.empty()) out.push_back(item);
      start = k + 1;
    }
  }
  return out;
}

bool is_identifier(std::string_view s) {
  return !s.empty() && !std::isdigit(static_cast<unsigned char>(s[0])) && std::all_of(s.begin(), s.end(), is_ident_char);
}

}  // namespace

std::vector<std::string> getstate_names(const TsClass& cls, size_t n) {
  std::vector<std::string> out(n);
  for (size_t k = 0; k < n; ++k) out[k] = std::to_string(k);
  const TsMethod* getstate = nullptr;
  for (const TsMethod& m : cls.methods)
    if (m.name == "__getstate__") getstate = &m;
  if (!getstate) return out;
  // `local = self.name` reads, the first `local = (...)` tuple of each local, and the last return.
  std::unordered_map<std::string_view, std::string_view> reads, tuples;
  std::string_view ret;
  for (const TsLine& l : getstate->body) {
    std::string_view t = l.text;
    if (t.substr(0, 7) == "return ") {
      ret = t.substr(7);
      continue;
    }
    const size_t eq = t.find(" = ");
    if (eq == std::string_view::npos || !is_identifier(t.substr(0, eq))) continue;
    const std::string_view lhs = t.substr(0, eq), rhs = t.substr(eq + 3);
    if (rhs.substr(0, 5) == "self." && is_identifier(rhs.substr(5))) reads[lhs] = rhs.substr(5);
    else if (rhs.size() >= 2 && rhs.front() == '(' && rhs.back() == ')') tuples.emplace(lhs, rhs);
  }
  if (auto it = tuples.find(ret); it != tuples.end()) ret = it->second;
  if (ret.size() < 2 || ret.front() != '(' || ret.back() != ')') return out;
  const std::vector<std::string_view> items = top_level_items(ret.substr(1, ret.size() - 2));
  if (items.size() != n) return out;
  for (size_t k = 0; k < n; ++k) {
    std::string_view e = items[k];
    if (e.substr(0, 5) == "self." && is_identifier(e.substr(5))) out[k] = std::string(e.substr(5));
    else if (is_identifier(e)) out[k] = std::string(reads.count(e) ? reads[e] : e);
  }
  return out;
}

std::vector<TsClass> parse_torchscript_code(std::string_view module, std::string_view source) {
  std::vector<TsClass> classes;
  size_t cls = SIZE_MAX, functions = SIZE_MAX;  // indexes: classes grows while a method is read
  TsMethod* method = nullptr;
  size_t def_indent = 0;
  int open_parens = 0;  // of the signature being read
  size_t pos = 0;
  uint32_t lineno = 0;
  auto parens = [](std::string_view s) {
    int n = 0;
    for (char c : s) n += c == '(' ? 1 : c == ')' ? -1 : 0;
    return n;
  };
  auto start_def = [&](TsClass& c, std::string_view def) {
    const size_t open = def.find('(');
    if (open == std::string_view::npos || open <= 4) return;
    c.methods.push_back(TsMethod{std::string(def.substr(4, open - 4)), {}, {}, std::string(def.substr(open))});
    method = &c.methods.back();
    open_parens = parens(def.substr(open));
  };
  while (pos <= source.size()) {
    ++lineno;
    size_t nl = source.find('\n', pos);
    if (nl == std::string_view::npos) nl = source.size();
    std::string_view line = source.substr(pos, nl - pos);
    pos = nl + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    const size_t ind = indent_of(line);
    if (method && open_parens > 0) {  // a signature over several lines
      method->signature += "\n";
      method->signature += line;
      open_parens += parens(line);
      continue;
    }
    if (method && ind > def_indent) {
      self_calls(line, method->self_calls);
      method->body.push_back(TsLine{lineno, std::string(line.substr(ind)), static_cast<uint32_t>(ind)});
      continue;
    }
    method = nullptr;
    if (ind == 0) {
      cls = SIZE_MAX;
      if (line.substr(0, 4) == "def ") {
        if (functions == SIZE_MAX) {
          functions = classes.size();
          TsClass f;
          f.qualified = std::string(module);
          f.functions = true;
          classes.push_back(std::move(f));
        }
        def_indent = 0;
        start_def(classes[functions], line);
      } else if (line.substr(0, 6) == "class ") {
        const size_t open = line.find('('), colon = line.rfind(':');
        const size_t name_end = std::min(open, colon);
        if (name_end == std::string_view::npos || name_end <= 6) continue;
        TsClass c;
        c.qualified = std::string(module) + "." + std::string(line.substr(6, name_end - 6));
        if (open != std::string_view::npos) {
          const size_t close = line.find(')', open);
          if (close != std::string_view::npos) c.base = std::string(line.substr(open + 1, close - open - 1));
        }
        cls = classes.size();
        classes.push_back(std::move(c));
      }
      continue;
    }
    if (cls == SIZE_MAX || ind != 2) continue;
    TsClass& c = classes[cls];
    std::string_view body = line.substr(2);
    if (body.substr(0, 14) == "__parameters__") {
      c.parameters = quoted_list(body.substr(14));
    } else if (body.substr(0, 11) == "__buffers__") {
      c.buffers = quoted_list(body.substr(11));
    } else if (body.substr(0, 17) == "__annotations__[\"") {
      const size_t end = body.find("\"]", 17);
      const size_t eq = body.find("= ", end == std::string_view::npos ? 0 : end);
      if (end != std::string_view::npos && eq != std::string_view::npos)
        c.attributes.emplace_back(std::string(body.substr(17, end - 17)), std::string(body.substr(eq + 2)));
    } else if (body.substr(0, 4) == "def ") {
      def_indent = 2;
      start_def(c, body);
    } else {
      const size_t colon = body.find(" : ");
      if (colon != std::string_view::npos && colon > 0 &&
          std::all_of(body.begin(), body.begin() + static_cast<std::ptrdiff_t>(colon), is_ident_char)) {
        std::string_view type = body.substr(colon + 3);
        if (auto eq = type.find(" = "); eq != std::string_view::npos) type = type.substr(0, eq);
        c.attributes.emplace_back(std::string(body.substr(0, colon)), std::string(type));
      }
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
  // Leaves on_path_ when the walk of a value returns: a value met again below itself is not entered.
  struct OnPath {
    std::unordered_set<const Value*>& path;
    const Value* v;
    ~OnPath() { path.erase(v); }
  };

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
        if (!c.functions) classes_.emplace(c.qualified, std::move(c));
      }
    }
  }

  const TsClass* class_of(const Value* obj) const {
    auto it = classes_.find(obj->qualified());
    return it == classes_.end() ? nullptr : &it->second;
  }

  bool is_module_object(const Value* v) const {
    if (!is_object(v) || v->callable()->str().substr(0, 9) != "__torch__") return false;
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
    if (depth == 0) root_has_training_ = m.training.has_value();
    // The same module object at a second path: listed (its entries too, as state_dict() would), and
    // marked so that module counts take it once. A module that contains itself stops here.
    auto seen = first_path_.find(obj);
    if (seen != first_path_.end()) m.shared_with = seen->second;
    else first_path_.emplace(obj, path);
    ck_.modules.push_back(std::move(m));
    const size_t index = ck_.modules.size() - 1;
    if (!on_path_.insert(obj).second) return;
    const OnPath leave{on_path_, obj};
    if (!st) return;
    const TsClass* cls = class_of(obj);
    if (st->kind != PKind::Dict) {
      // __getstate__ classes (quantized Conv2d, ...): the state is what that method returned, named
      // from its code; `training` among it is the module's mode.
      if (st->kind != PKind::Tuple) {
        hidden(st, join_path(path, "0"), depth + 1, pkl);
        return;
      }
      const std::vector<std::string> names = getstate_names(cls ? *cls : TsClass{}, st->kids().size());
      for (size_t k = 0; k < st->kids().size(); ++k) {
        const Value* v = st->kids()[k];
        if (names[k] == "training" && v->kind == PKind::Bool) ck_.modules[index].training = v->b;
        else member(index, path, names[k], v, depth, pkl);
      }
      return;
    }
    auto has = [](const std::vector<std::string>& v, std::string_view k) { return std::find(v.begin(), v.end(), k) != v.end(); };
    const auto& p = st->kids();
    for (size_t k = 0; k + 1 < p.size(); k += 2) {
      if (!p[k]->is_str()) continue;
      const std::string key(p[k]->str());
      const Value* v = p[k + 1];
      if (interp_->is_tensor(v)) {
        // Declared classes say which tensors are parameters or buffers; any other is an attribute
        // (named_buffers() leaves it out). Without a declaration requires_grad is the best guess.
        const bool param = cls ? has(cls->parameters, key) : interp_->tensor(v, key).requires_grad;
        const TensorKind kind = param                            ? TensorKind::Parameter
                                : !cls || has(cls->buffers, key) ? TensorKind::Buffer
                                                                 : TensorKind::Attribute;
        add_tensor(v, join_path(path, key), kind, cls == nullptr, pkl);
      } else if (key != "training" && key != "_is_full_backward_hook") {
        member(index, path, key, v, depth, pkl);
      }
    }
  }

  // One non-tensor attribute of the module at ck_.modules[index]: a submodule, or a value whose tensors
  // (in containers, torch.classes objects) are attributes; its plain value is listed unless it is a module.
  void member(size_t index, const std::string& path, const std::string& key, const Value* v, int depth, const ByteView& pkl) {
    if (is_module_object(v)) {
      walk(v, join_path(path, key), depth + 1, pkl);
      return;
    }
    if (interp_->is_tensor(v)) {
      add_tensor(v, join_path(path, key), TensorKind::Attribute, false, pkl);
      return;
    }
    ck_.modules[index].attributes[key] = plain_json(v, nullptr, 8, 1000);
    hidden(v, join_path(path, key), depth + 1, pkl);
  }

  void add_tensor(const Value* v, const std::string& name, TensorKind kind, bool inferred, const ByteView& pkl) {
    if (ck_.tensors.size() >= lim_.tensors) pkl.fail(v->offset, fmt::format("more than {} tensors", lim_.tensors));
    Tensor t = interp_->tensor(v, name);
    t.kind = kind;
    t.is_parameter_object = kind == TensorKind::Parameter;
    t.kind_inferred = inferred;
    ck_.tensors.push_back(std::move(t));
  }

  // Tensors inside a value that is no module attribute of its own: containers by index (dicts by key)
  // and objects (torch.classes.quantized.LinearPackedParamsBase, xnnpack contexts, ...) through their
  // state. Modules found inside are walked as modules.
  void hidden(const Value* v, const std::string& name, int depth, const ByteView& pkl) {
    if (depth > static_cast<int>(lim_.pickle_depth)) pkl.fail(v->offset, "attributes nest deeper than the limit");
    if (interp_->is_tensor(v)) {
      add_tensor(v, name, TensorKind::Attribute, false, pkl);
      return;
    }
    if (is_module_object(v)) {
      walk(v, name, depth, pkl);
      return;
    }
    if (!on_path_.insert(v).second) return;
    const OnPath leave{on_path_, v};
    if (v->kind == PKind::Tuple || v->kind == PKind::List) {
      for (size_t k = 0; k < v->kids().size(); ++k) hidden(v->kids()[k], join_path(name, std::to_string(k)), depth + 1, pkl);
    } else if (v->kind == PKind::Dict) {
      const auto& p = v->kids();
      for (size_t k = 0; k + 1 < p.size(); k += 2) {
        const std::string key = p[k]->is_str()   ? std::string(p[k]->str())
                                : p[k]->is_int() ? std::to_string(p[k]->i)
                                                 : std::to_string(k / 2);
        hidden(p[k + 1], join_path(name, key), depth + 1, pkl);
      }
    } else if (v->kind == PKind::Object) {
      // torch.jit._pickle.build_tensorlist([...]), restore_type_tag(value, "List[...]") and the like
      // stand for their first argument
      const Value* a = v->args();
      if (a && !a->kids().empty() && v->qualified().rfind("torch.jit._pickle.", 0) == 0) hidden(a->kids()[0], name, depth + 1, pkl);
      if (const Value* st = v->state()) hidden(st, name, depth + 1, pkl);
    }
  }

  // Tensors of a constants.pkl / bytecode.pkl value (a tensor, or one inside an op context such as
  // xnnpack's), each distinct view once.
  void constant_tensors(TorchInterpreter& interp, const Value* v, const std::string& name, int depth, const ByteView& pkl,
                        TsConstants& cs, std::unordered_set<const Value*>& visited) {
    if (depth > static_cast<int>(lim_.pickle_depth)) pkl.fail(v->offset, "constants nest deeper than the limit");
    if (!visited.insert(v).second) return;
    if (interp.is_tensor(v)) {
      Tensor t = interp.tensor(v, name);
      std::string key = t.storage + "|" + std::to_string(t.offset) + "|" + (t.dtype ? std::string(t.dtype->name) : "?");
      for (int64_t x : t.shape) key += "," + std::to_string(x);
      key += "|";
      for (int64_t x : t.stride) key += "," + std::to_string(x);
      if (t.storage.empty()) key = fmt::format("@{}", static_cast<const void*>(v));
      if (!constant_views_.insert(key).second) return;
      ++cs.tensors;
      cs.elements += static_cast<uint64_t>(t.numel);
      cs.bytes += t.bytes;
      return;
    }
    for (const Value* c : v->kids()) constant_tensors(interp, c, name, depth + 1, pkl, cs, visited);
    if (v->kind == PKind::Object) {
      if (v->args()) constant_tensors(interp, v->args(), name, depth + 1, pkl, cs, visited);
      if (v->state()) constant_tensors(interp, v->state(), name, depth + 1, pkl, cs, visited);
      for (const Value* c : v->pairs()) constant_tensors(interp, c, name, depth + 1, pkl, cs, visited);
    }
  }

  // Storages under constants/ (or bytecode/ in archives from before the two shared one folder).
  StorageLocator constant_locator(const ByteView& pkl) {
    StorageLocator in_constants = zip_storage_locator(zip_, pre_ + "constants/", pkl);
    StorageLocator in_bytecode = zip_storage_locator(zip_, pre_ + "bytecode/", pkl);
    return [this, in_constants, in_bytecode](Storage& s, const Value* at) {
      if (!zip_.find(pre_ + "constants/" + s.key) && zip_.find(pre_ + "bytecode/" + s.key)) in_bytecode(s, at);
      else in_constants(s, at);
    };
  }

  // constants.pkl: a tuple of constants; tensors there (and in op contexts) are weights frozen into the
  // code. bytecode.pkl (lite interpreter) holds the methods' constants again, sharing their storages.
  void constants() {
    const ZipEntry* e = zip_.find(pre_ + "constants.pkl");
    if (!e) return;
    ByteView pkl = zip_.stored(*e);
    Unpickled u = unpickle(pkl, 0, *ck_.heap, lim_);
    for (auto& g : u.globals) ck_.globals.push_back(std::move(g));
    // Constants are not model entries; their storages still count in the file.
    TorchInterpreter interp(ck_, pkl, lim_, constant_locator(pkl));
    interp.set_in_model(false);
    TsConstants cs;
    cs.count = u.root->kids().size();
    std::unordered_set<const Value*> visited;
    if (u.root->kind == PKind::Tuple || u.root->kind == PKind::List) {
      for (size_t k = 0; k < u.root->kids().size(); ++k) {
        const Value* c = u.root->kids()[k];
        TsConstant item;
        item.name = fmt::format("c{}", k);  // code/ refers to it as CONSTANTS.c<k>
        if (!interp.is_tensor(c)) {
          item.value = plain_json(c, nullptr, 4, 1000);
          constant_tensors(interp, c, item.name, 1, pkl, cs, visited);
          cs.items.push_back(std::move(item));
          continue;
        }
        Tensor t = interp.tensor(c, item.name);
        constant_tensors(interp, c, item.name, 1, pkl, cs, visited);
        item.is_tensor = true;
        item.dtype = t.dtype ? std::string(t.dtype->name) : "?";
        item.shape = t.shape;
        item.numel = t.numel;
        cs.items.push_back(std::move(item));
      }
    }
    bytecode(cs);
    const uint64_t tensors = cs.tensors, elements = cs.elements, bytes = cs.bytes;
    ck_.torchscript.constants = std::move(cs);
    // torch.jit.freeze (optimize_for_mobile too) folds the parameters into constants and leaves the
    // root without its `training` attribute, which every unfrozen module keeps; tensor constants of
    // an ordinary trace (torch.tensor(2.0)) leave it in place.
    const bool frozen = tensors > 0 && !root_has_training_;
    ck_.torchscript.frozen = frozen;
    if (frozen) ck_.frozen.push_back({tensors, elements, bytes});
  }

  void bytecode(TsConstants& cs) {
    const ZipEntry* e = zip_.find(pre_ + "bytecode.pkl");
    if (!e) return;
    std::string inflated;
    ByteView pkl = zip_.content(*e, &inflated, lim_.inflate_bytes);
    Heap heap;  // its values view `inflated`, and nothing outlives this call
    Unpickled u = unpickle(pkl, 0, heap, lim_);
    const size_t before = ck_.storages.size();
    {
      TorchInterpreter interp(ck_, pkl, lim_, constant_locator(pkl));
      interp.set_in_model(false);
      std::unordered_set<const Value*> visited;
      constant_tensors(interp, u.root, "bytecode", 0, pkl, cs, visited);
    }
    // The same constants/ records as constants.pkl's: each storage counts once in the file.
    std::unordered_set<std::string_view> members;
    for (size_t k = 0; k < before; ++k) members.insert(ck_.storages[k].member);
    size_t out = before;
    for (size_t k = before; k < ck_.storages.size(); ++k)
      if (members.insert(ck_.storages[k].member).second) ck_.storages[out++] = std::move(ck_.storages[k]);
    ck_.storages.resize(out);
  }

  // Every compiled method of the root, whether forward reaches it, and whether it is an entry point
  // (reachable from no other method: @torch.jit.export and the like).
  void methods(const Value* root) {
    const TsClass* cls = class_of(root);
    std::vector<TsMethodInfo> out;
    if (cls) {
      ck_.torchscript.root_class = cls->qualified;
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
  bool root_has_training_ = true;
  std::unordered_set<std::string> constant_views_;  // constants.pkl / bytecode.pkl tensors counted
};

}  // namespace

void read_torchscript(Checkpoint& ck, const ZipReader& zip, const std::string& prefix, const Limits& limits) {
  if (!ck.heap) ck.heap = std::make_shared<Heap>();
  TsReader(ck, zip, prefix, limits).run();
}

}  // namespace ckpt
