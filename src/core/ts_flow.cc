#include "core/ts_flow.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <memory>
#include <set>
#include <string_view>
#include <unordered_map>

#include "core/ts_parse.h"
#include "core/ts_values.h"

namespace ckpt {
namespace tsflow {
namespace {

// ---- the interpreter ----

struct Function {
  const TsClass* cls = nullptr;  // the class of a method; the file's functions for a free function
  const TsMethod* m = nullptr;
  std::string qualified;  // "__torch__.m.Net.forward", "__torch__.m.helper"
  std::vector<std::pair<std::string, Val>> params;  // declared
  std::vector<std::string> defaults;  // as printed, "" for none
  Val ret;
  std::vector<Stmt> body;
  bool parsed = false;
};

class Flow {
 public:
  explicit Flow(const Checkpoint& ck) : ck_(ck) {
    for (const TsClass& c : ck.ts_classes) {
      if (c.functions) {
        for (const TsMethod& m : c.methods) add(c, m, c.qualified + "." + m.name);
      } else {
        classes_.emplace(c.qualified, &c);
        for (const TsMethod& m : c.methods) add(c, m, c.qualified + "." + m.name);
      }
    }
  }

  std::vector<FlowHit> run() {
    auto root = classes_.find(ck_.torchscript.root_class);
    if (root == classes_.end()) return {};
    std::vector<std::string> entries{"forward"};
    for (const TsMethodInfo& m : ck_.torchscript.methods)
      if (m.entry_point) entries.push_back(m.name);
    for (const std::string& e : entries) {
      Function* f = find(root->second->qualified + "." + e);
      if (!f) continue;
      entry_ = e;
      Val self = of(Val::Obj);
      self.ref = root->second->qualified;
      std::vector<Val> args{self};
      prepare(*f);
      // forward(x) as called with its required arguments: the others take their defaults
      for (size_t k = 1; k < f->params.size() && f->defaults[k].empty(); ++k) args.push_back(f->params[k].second);
      call(*f, args, {});
    }
    std::vector<FlowHit> out;
    for (size_t k = 0; k < hits_.size(); ++k)
      if (!asserts_.count(k)) out.push_back(std::move(hits_[k]));
    return out;
  }

 private:
  struct Frame {
    const Function* f = nullptr;
    std::map<std::string, Val> env;
    Val ret;
    bool returned = false, has_ret = false;
  };

  void add(const TsClass& c, const TsMethod& m, std::string q) {
    auto f = std::make_unique<Function>();
    f->cls = &c;
    f->m = &m;
    f->qualified = q;
    functions_.emplace(std::move(q), std::move(f));
  }

  Function* find(const std::string& q) {
    auto it = functions_.find(q);
    return it == functions_.end() ? nullptr : it->second.get();
  }

  void prepare(Function& f) {
    if (f.parsed) return;
    f.parsed = true;
    const std::string& sig = f.m->signature;
    const size_t close = sig.rfind(')');
    if (!sig.empty() && sig[0] == '(' && close != std::string::npos) {
      for (const std::string& p : split_top(std::string_view(sig).substr(1, close - 1), ',')) {
        const size_t colon = p.find(':'), eq = p.find('=');
        std::string name = p.substr(0, std::min(colon, eq));
        while (!name.empty() && name.back() == ' ') name.pop_back();
        std::string type = colon == std::string::npos ? "" : p.substr(colon + 1, eq == std::string::npos ? std::string::npos : eq - colon - 1);
        f.params.emplace_back(name, of_type(type));
        f.defaults.push_back(eq == std::string::npos ? "" : p.substr(eq + 1));
      }
      const size_t arrow = sig.find("->", close);
      if (arrow != std::string::npos) {
        std::string r = sig.substr(arrow + 2);
        if (!r.empty() && r.back() == ':') r.pop_back();
        f.ret = of_type(r);
      }
    }
    size_t k = 0;
    if (!f.m->body.empty()) f.body = parse_block(f.m->body, k, f.m->body.front().indent);
  }

  std::string context_key(const Function& f, const std::vector<Val>& args) {
    std::string key = f.qualified;
    for (const Val& v : args) {
      key += '|';
      key += static_cast<char>('0' + v.k);
      key += static_cast<char>('0' + v.dtype);
      key += v.known < 0 ? '?' : static_cast<char>('0' + v.known);
      key += v.maybe_none ? 'n' : '-';
      if (v.k == Val::Obj || v.k == Val::Func) key += v.ref;
      for (size_t h : v.from) key += '*' + std::to_string(h);
    }
    return key + '@' + entry_;
  }

  Val call(Function& f, const std::vector<Val>& args, const std::vector<std::pair<std::string, Val>>& kwargs) {
    prepare(f);
    std::map<std::string, Val> env;
    for (size_t k = 0; k < f.params.size(); ++k) {
      const std::string& name = f.params[k].first;  // not a structured binding: the lambda below captures it
      const Val& declared = f.params[k].second;
      Val v = declared;
      if (k < args.size()) {
        v = args[k].k == Val::Unknown ? declared : args[k];
      } else if (auto it = std::find_if(kwargs.begin(), kwargs.end(), [&](const auto& kw) { return kw.first == name; });
                 it != kwargs.end()) {
        v = it->second;
      } else if (!f.defaults[k].empty()) {
        v = literal(f.defaults[k], declared);
      }
      env[name] = v;
    }
    std::vector<Val> bound;
    for (const auto& [name, v] : env) bound.push_back(v);
    const std::string key = context_key(f, bound);
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    if (active_.count(f.qualified) || depth_ > 48 || ++contexts_ > 20000) return f.ret;
    active_.insert(f.qualified);
    ++depth_;
    const Stmt* saved = cur_;
    const Function* saved_fn = cur_fn_;
    Frame fr;
    fr.f = &f;
    fr.env = std::move(env);
    exec(fr, f.body);
    cur_ = saved;
    cur_fn_ = saved_fn;
    --depth_;
    active_.erase(f.qualified);
    Val r = fr.has_ret ? fr.ret : f.ret;
    if (r.k == Val::Unknown && f.ret.k != Val::Unknown) {
      std::set<size_t> from = r.from;
      r = f.ret;
      r.from = std::move(from);
    }
    memo_[key] = r;
    return r;
  }

  static Val literal(std::string_view s, const Val& declared) {
    while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
    if (s == "None") return of(Val::None);
    if (s == "True" || s == "False") return boolean(s == "True");
    Val v = declared;
    v.maybe_none = false;
    return v;
  }

  // ---- statements ----

  void exec(Frame& fr, const std::vector<Stmt>& block) {
    for (size_t k = 0; k < block.size() && !fr.returned && budget_ > 0; ++k, --budget_) exec_one(fr, block[k]);
  }

  void exec_one(Frame& fr, const Stmt& s) {
    cur_ = &s;
    cur_fn_ = fr.f;
    const std::string& t = s.text;
    if (t == "pass" || t == "break" || t == "continue") return;
    if (t.rfind("if ", 0) == 0 && opens_block(t)) return exec_if(fr, s);
    if (t.rfind("while ", 0) == 0 && opens_block(t)) {
      const Node cond = parse(t.substr(6, t.size() - 7));
      const Val c = condition(fr, cond);
      if (c.known == 0) return;
      loop(fr, s.body, &cond);
      return;
    }
    if (t.rfind("for ", 0) == 0 && opens_block(t)) {
      const size_t in = t.find(" in ");
      if (in != std::string::npos) {
        const Val seq = eval(fr, parse(t.substr(in + 4, t.size() - in - 5)));
        mark(seq, true, false);
        Val item = seq.k == Val::List && !seq.items.empty() ? seq.items[0] : of(Val::Unknown);
        for (const std::string& n : split_top(std::string_view(t).substr(4, in - 4), ',')) fr.env[n] = item;
      }
      loop(fr, s.body);
      return;
    }
    if (t.rfind("with ", 0) == 0 && opens_block(t)) return exec(fr, s.body);  // with torch.no_grad(): runs its body
    if (opens_block(t)) return;  // anything else that opens a block (TorchScript prints none): unread
    if (t.rfind("return", 0) == 0) {
      const Val v = t.size() > 7 ? eval(fr, parse(t.substr(7), true)) : of(Val::None);
      fr.ret = fr.has_ret ? join(fr.ret, v) : v;
      fr.has_ret = true;
      fr.returned = true;
      return;
    }
    std::optional<Assignment> assigned = parse_assignment(t);
    if (!assigned) return;
    const std::vector<std::string> names = std::move(assigned->targets);
    Node e = std::move(assigned->value);
    const bool hoisted = names.size() == 1 && is_temp(names[0]);
    Val v;
    if (names.size() > 1 && e.k == Node::Tuple && e.a.size() == names.size()) {  // _0, n0 = bool(...), n1
      v = of(Val::Tuple);
      for (size_t k = 0; k < names.size(); ++k) v.items.push_back(eval(fr, e.a[k], is_temp(names[k]) ? Ctx::Hoisted : Ctx::Plain));
    } else {
      v = eval(fr, e, hoisted ? Ctx::Hoisted : Ctx::Plain);
    }
    if (names.size() == 1) {
      fr.env[names[0]] = v;
    } else if (names.size() > 1) {
      for (size_t k = 0; k < names.size(); ++k)
        fr.env[names[k]] = (v.k == Val::Tuple || v.k == Val::List) && !v.items.empty()
                               ? v.items[v.k == Val::Tuple && k < v.items.size() ? k : 0]
                               : of(Val::Unknown);
    }
    if (raised_) {
      raised_ = false;
      fr.returned = true;  // the rest of this block does not run
    }
  }

  static bool is_temp(const std::string& n) {
    return n.size() > 1 && n[0] == '_' && std::all_of(n.begin() + 1, n.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
  }

  // The body once, then the condition again as the next iteration reads it.
  void loop(Frame& fr, const std::vector<Stmt>& body, const Node* cond = nullptr) {
    Frame inner = fr;
    inner.returned = false;
    exec(inner, body);
    if (cond && !inner.returned) condition(inner, *cond);
    take_ret(fr, inner);
    join_env(fr, inner);
  }

  // An assert, as TorchScript prints `assert t`: `if bool(t): pass` else `raise AssertionError`.
  static bool is_assert(const Stmt& s) {
    return s.body.size() == 1 && s.body[0].text == "pass" && s.orelse.size() == 1 &&
           s.orelse[0].text.find("ops.prim.RaiseException(") != std::string::npos &&
           s.orelse[0].text.find("AssertionError") != std::string::npos;
  }

  void exec_if(Frame& fr, const Stmt& s) {
    const std::string& t = s.text;
    const Node cond = parse(t.substr(3, t.size() - 4));
    const Val c = condition(fr, cond, is_assert(s));
    cur_ = &s;
    if (c.known == 1) return exec(fr, s.body);
    if (c.known == 0) return exec(fr, s.orelse);
    Frame a = fr, b = fr;
    a.returned = b.returned = false;
    exec(a, s.body);
    exec(b, s.orelse);
    take_ret(fr, a);
    take_ret(fr, b);
    fr.returned = a.returned && b.returned;
    // what runs after the if sees the branches that fell through it
    fr.env = a.returned && !b.returned ? std::move(b.env) : std::move(a.env);
    if (!a.returned && !b.returned) join_env(fr, b);
  }

  static void take_ret(Frame& into, const Frame& from) {
    if (!from.has_ret) return;
    into.ret = into.has_ret ? join(into.ret, from.ret) : from.ret;
    into.has_ret = true;
  }

  static void join_env(Frame& fr, const Frame& other) {
    for (const auto& [n, v] : other.env) {
      auto it = fr.env.find(n);
      fr.env[n] = it == fr.env.end() ? v : join(it->second, v);
    }
  }

  Val condition(Frame& fr, const Node& cond, bool assert_stmt = false) {
    Val c = eval(fr, cond, assert_stmt ? Ctx::Assert : Ctx::Condition);
    if (assert_stmt) {  // `assert t`: dynamo makes it torch._assert_async, no break
      if (c.truth != SIZE_MAX) asserts_.insert(c.truth);
      return boolean(-1);
    }
    mark(c, true, false);
    if (c.truth != SIZE_MAX) hits_[c.truth].kind = FlowKind::TruthTest;
    if (c.k == Val::None) return boolean(0);
    if (c.k == Val::Obj || c.k == Val::Func) return boolean(1);
    return c;
  }

  void mark(const Val& v, bool condition, bool size) {
    for (size_t h : v.from) {
      hits_[h].to_condition |= condition;
      hits_[h].to_size |= size;
    }
    for (const Val& i : v.items) mark(i, condition, size);
  }

  static Node parse(std::string_view text, bool list = false) { return parse_expr(text, list); }

  size_t hit(FlowKind kind, std::string op) {
    const Stmt& s = *cur_;
    const std::string key = std::to_string(reinterpret_cast<uintptr_t>(s.line)) + "|" + op + "|" +
                            std::to_string(static_cast<int>(kind == FlowKind::TruthTest ? FlowKind::TruthValue : kind));
    auto [it, fresh] = sites_.emplace(key, hits_.size());
    if (fresh) {
      FlowHit h;
      h.kind = kind;
      h.file = cur_fn_->cls->file;
      h.line = s.line->line;
      h.function = cur_fn_->qualified;
      h.text = s.text;
      h.op = std::move(op);
      hits_.push_back(std::move(h));
    }
    FlowHit& h = hits_[it->second];
    if (std::find(h.entries.begin(), h.entries.end(), entry_) == h.entries.end()) h.entries.push_back(entry_);
    return it->second;
  }

  // ---- expressions ----

  enum class Ctx : uint8_t { Plain, Condition, Hoisted, Assert };

  Val eval(Frame& fr, const Node& n, Ctx ctx = Ctx::Plain) {
    switch (n.k) {
      case Node::Name: return name(fr, n.s);
      case Node::Num: return of(n.s.find_first_of(".e") != std::string::npos && n.s.rfind("0x", 0) != 0 ? Val::Float : Val::Int);
      case Node::Str: {
        Val v = of(Val::Str);
        v.ref = n.s;
        return v;
      }
      case Node::Attr: {
        const std::string d = dotted(n);
        if (d.rfind("__torch__.", 0) == 0 && (functions_.count(d) || is_compiling_fn(d))) {
          Val f = of(Val::Func);
          f.ref = d;
          return f;
        }
        if (d.rfind("CONSTANTS.", 0) == 0) {
          Val c = tensor();
          c.fixed = true;
          return c;
        }
        return attribute(eval(fr, n.a[0]), n.s);
      }
      case Node::Call: return call_expr(fr, n, ctx);
      case Node::Sub: {
        const Val obj = eval(fr, n.a[0]);
        const Val idx = eval(fr, n.a[1]);
        if (obj.k == Val::Tensor) {
          Val r = tensor(obj.dtype);
          if (is_tensor(idx) && idx.dtype == Val::Boolean) hit(FlowKind::DynamicShape, "aten.nonzero");
          return r;
        }
        if (obj.k == Val::Tuple && n.a[1].k == Node::Num) {
          const size_t k = std::strtoul(n.a[1].s.c_str(), nullptr, 10);
          if (k < obj.items.size()) return obj.items[k];
        }
        if (obj.k == Val::List && !obj.items.empty()) return obj.items[0];
        Val r = of(Val::Unknown);
        r.from = obj.from;
        return r;
      }
      case Node::Tuple:
      case Node::List: {
        Val v = of(n.k == Node::Tuple ? Val::Tuple : Val::List);
        for (const Node& i : n.a) v.items.push_back(eval(fr, i));
        if (n.k == Node::List) {
          Val elem = v.items.empty() ? of(Val::Unknown) : v.items[0];
          for (size_t k = 1; k < v.items.size(); ++k) elem = join(elem, v.items[k]);
          for (const Val& i : v.items) v.from.insert(i.from.begin(), i.from.end());
          v.items = v.items.empty() ? std::vector<Val>{} : std::vector<Val>{elem};
        }
        return v;
      }
      case Node::Dict:
        for (const Node& i : n.a) eval(fr, i);
        return of(Val::Unknown);
      case Node::Bin: return binary(fr, n);
      case Node::Unary: {
        Val x = eval(fr, n.a[0]);
        if (n.s == "not") {
          Val r = boolean(x.k == Val::Bool && x.known >= 0 ? !x.known : x.k == Val::None ? 1 : -1);
          r.from = x.from;
          r.truth = x.truth;
          return r;
        }
        return x;
      }
      case Node::Ternary: {
        const Val c = condition(fr, n.a[1]);
        if (c.known == 1) return eval(fr, n.a[0]);
        if (c.known == 0) return eval(fr, n.a[2]);
        return join(eval(fr, n.a[0]), eval(fr, n.a[2]));
      }
      case Node::Kw: return eval(fr, n.a[0]);
      case Node::Unknown: return of(Val::Unknown);
    }
    return of(Val::Unknown);
  }

  Val name(Frame& fr, const std::string& s) {
    if (auto it = fr.env.find(s); it != fr.env.end()) return it->second;
    if (s == "None") return of(Val::None);
    if (s == "True" || s == "False") return boolean(s == "True");
    if (s == "inf" || s == "nan") return of(Val::Float);
    return of(Val::Unknown);
  }

  Val attribute(const Val& obj, const std::string& attr) {
    if (obj.k == Val::Obj) {
      auto it = classes_.find(obj.ref);
      if (it != classes_.end()) {
        const TsClass& c = *it->second;
        if (std::count(c.parameters.begin(), c.parameters.end(), attr) || std::count(c.buffers.begin(), c.buffers.end(), attr))
          return tensor();
        for (const auto& [n, type] : c.attributes)
          if (n == attr) return of_type(type);
      }
      return of(Val::Unknown);
    }
    Val r = of(Val::Unknown);
    r.from = obj.from;
    return r;
  }

  Val binary(Frame& fr, const Node& n) {
    const Val l = eval(fr, n.a[0]);
    if (n.s == "and" || n.s == "or") {
      const bool is_and = n.s == "and";
      if (l.k == Val::Bool && l.known == (is_and ? 0 : 1)) return l;
      const Val r = eval(fr, n.a[1]);
      Val v = boolean(l.known >= 0 && r.k == Val::Bool ? r.known : -1);
      v.from = l.from;
      v.from.insert(r.from.begin(), r.from.end());
      return v;
    }
    const Val r = eval(fr, n.a[1]);
    Val v;
    if (is_tensor(l) || is_tensor(r)) {
      v = tensor(one_of(n.s, {"==", "!=", "<", ">", "<=", ">="}) ? Val::Boolean : Val::AnyDtype);
    } else if (one_of(n.s, {"==", "!=", "<", ">", "<=", ">=", "is", "is not", "in", "not in"})) {
      v = boolean(-1);
      if (n.s == "is" || n.s == "is not") v.known = is_none_test(l, r, n.s == "is");
    } else {
      v = of(l.k == Val::Float || r.k == Val::Float ? Val::Float : l.k == Val::Int && r.k == Val::Int ? Val::Int : Val::Unknown);
    }
    v.from = l.from;
    v.from.insert(r.from.begin(), r.from.end());
    return v;
  }

  Val call_expr(Frame& fr, const Node& n, Ctx ctx) {
    const Node& callee = n.a[0];
    std::vector<Val> args;
    std::vector<std::pair<std::string, Val>> kwargs;
    std::vector<const Node*> arg_nodes;
    for (size_t k = 1; k < n.a.size(); ++k) {
      if (n.a[k].k == Node::Kw) {
        kwargs.emplace_back(n.a[k].s, eval(fr, n.a[k].a[0]));
      } else {
        arg_nodes.push_back(&n.a[k]);
        args.push_back(eval(fr, n.a[k]));
      }
    }
    std::set<size_t> from;
    for (const Val& a : args) from.insert(a.from.begin(), a.from.end());
    for (const auto& kw : kwargs) from.insert(kw.second.from.begin(), kw.second.from.end());
    const std::string fn = dotted(callee);

    // method calls on a value: (m).forward(x), x.tolist(), t.item()
    if (callee.k == Node::Attr && (fn.empty() || fr.env.count(fn.substr(0, fn.find('.'))) || fn.rfind("self.", 0) == 0)) {
      const Val obj = eval(fr, callee.a[0]);
      if (obj.k == Val::Obj) {
        if (Function* f = find(obj.ref + "." + callee.s)) {
          std::vector<Val> all{obj};
          all.insert(all.end(), args.begin(), args.end());
          return call(*f, all, kwargs);
        }
        return of(Val::Unknown);
      }
      if (obj.k == Val::Tensor) {
        if (callee.s == "tolist") {
          hit(obj.dtype == Val::Integer ? FlowKind::TolistInt : FlowKind::TolistFloat, "tolist");
          return of(Val::List);
        }
        if (callee.s == "item" && !obj.fixed) return scalar_hit(of(Val::Float), "item()");
        Val r = tensor(obj.dtype);
        r.fixed = obj.fixed;
        return r;
      }
      return of(Val::Unknown);
    }

    if (fn == "bool" && args.size() == 1) {
      if (is_data(args[0])) {
        if (ctx == Ctx::Assert) return boolean(-1);
        // TorchScript hoists a condition into a temporary (`_0 = bool(...)` then `while _0:`): such a
        // bool() is a truth test once a condition reads it; one kept in a named variable was the Python's.
        const size_t h = hit(ctx == Ctx::Condition ? FlowKind::TruthTest : FlowKind::TruthValue, "bool()");
        Val v = boolean(-1);
        if (ctx == Ctx::Hoisted) v.truth = h;
        else v.from.insert(h);  // where a bool() the Python wrote goes
        return v;
      }
      Val v = args[0].k == Val::Bool ? args[0] : boolean(-1);
      v.from = from;
      return v;
    }
    if ((fn == "int" || fn == "float") && args.size() == 1) {
      if (is_data(args[0])) return scalar_hit(of(fn == "int" ? Val::Int : Val::Float), fn + "()");
      Val v = of(fn == "int" ? Val::Int : Val::Float);
      v.from = from;
      return v;
    }
    if (fn == "print") {
      hit(FlowKind::Print, "print");
      return of(Val::None);
    }
    if (fn == "annotate" || fn == "unchecked_cast") {
      if (n.a.size() < 3) return of(Val::Unknown);
      Val declared = of_type(type_text(n.a[1]));
      Val v = args.size() > 1 ? args[1] : of(Val::Unknown);
      if (declared.k != Val::Unknown && (v.k != declared.k || fn == "unchecked_cast")) {
        if (v.k == declared.k) {
          v.maybe_none = declared.maybe_none;
        } else {
          std::set<size_t> f2 = v.from;
          v = declared;
          v.from = std::move(f2);
        }
      }
      return v;
    }
    if (fn == "uninitialized" && n.a.size() == 2) return of_type(type_text(n.a[1]));
    if (fn == "getattr" && args.size() >= 2) return attribute(args[0], args[1].ref);
    if (fn == "len" || fn == "range") {
      Val v = of(fn == "len" ? Val::Int : Val::List);
      if (fn == "range") v.items.push_back(of(Val::Int));
      v.from = from;
      return v;
    }
    if (fn == "isinstance" || fn == "hasattr") return boolean(-1);
    if (fn.rfind("ops.prim.", 0) == 0) return prim(fn.substr(9), args, from);
    if (fn.find("PythonOp") != std::string::npos) {
      hit(FlowKind::PythonOp, "prim::PythonOp");
      return of(Val::Unknown);
    }
    if (fn.rfind("torch.", 0) == 0 && fn.find('.', 6) == std::string::npos) return torch_op(fn.substr(6), args, arg_nodes, kwargs, from);
    if (fn == "torch.compiler.is_compiling" || fn == "torch._dynamo.is_compiling" || fn == "torch._utils.is_compiling") return boolean(1);

    // a free function: by name, or a local holding one (`_0 = __torch__.m.helper` then `_0(x)`)
    std::string target;
    if (fn.rfind("__torch__.", 0) == 0) {
      target = fn;
    } else if (callee.k == Node::Name) {
      const Val v = name(fr, callee.s);
      if (v.k == Val::Func) target = v.ref;
    }
    if (!target.empty()) {
      if (is_compiling_fn(target)) return boolean(1);  // under dynamo; the archive's own copy says False
      if (Function* f = find(target)) return call(*f, args, kwargs);
    }
    Val v = of(Val::Unknown);
    v.from = from;
    return v;
  }

  static bool is_compiling_fn(const std::string& q) {
    for (std::string_view s : {".torch.compiler.is_compiling", ".torch._dynamo.is_compiling", ".torch._utils.is_compiling",
                               ".torch._dynamo.external_utils.is_compiling", ".torch.compiler.is_dynamo_compiling"})
      if (q.size() >= s.size() && q.compare(q.size() - s.size(), s.size(), s) == 0) return true;
    return false;
  }

  static std::string type_text(const Node& n) {
    if (n.k == Node::Sub) {
      std::string inner;
      const Node& idx = n.a[1];
      if (idx.k == Node::Tuple) {
        for (size_t k = 0; k < idx.a.size(); ++k) inner += (k ? ", " : "") + type_text(idx.a[k]);
      } else {
        inner = type_text(idx);
      }
      return type_text(n.a[0]) + "[" + inner + "]";
    }
    return dotted(n);
  }

  Val scalar_hit(Val v, std::string op) {
    v.from.insert(hit(FlowKind::Scalar, std::move(op)));
    return v;
  }

  Val prim(const std::string& op, const std::vector<Val>& args, const std::set<size_t>& from) {
    if (op == "RaiseException") {
      if (!args.empty() && args[0].ref.find("annotated to be ignored") != std::string::npos)
        hit(FlowKind::IgnoredStub, "@torch.jit.unused");
      raised_ = true;
      return of(Val::None);
    }
    if (op == "tolist" && !args.empty() && is_tensor(args[0])) {
      hit(args[0].dtype == Val::Integer ? FlowKind::TolistInt : FlowKind::TolistFloat, "tolist");
      return of(Val::List);
    }
    if (op == "PythonOp") {
      hit(FlowKind::PythonOp, "prim::PythonOp");
      return of(Val::Unknown);
    }
    Val v = of(op == "dtype" || op == "min" || op == "max" ? Val::Int : op == "NumToTensor" ? Val::Tensor : Val::Unknown);
    v.fixed = op == "NumToTensor";
    if ((op == "unchecked_unwrap_optional" || op == "data") && !args.empty()) {
      v = args[0];
      v.maybe_none = false;
    }
    v.from = from;
    return v;
  }

  Val torch_op(const std::string& fn, const std::vector<Val>& args, const std::vector<const Node*>& nodes,
               const std::vector<std::pair<std::string, Val>>& kwargs, const std::set<size_t>& from) {
    if (fn == "warn") {
      hit(FlowKind::Warn, "warnings.warn");
      return of(Val::None);
    }
    if (fn == "__is__" || fn == "__isnot__") return boolean(args.size() == 2 ? is_none_test(args[0], args[1], fn == "__is__") : -1);
    if (fn == "__not__" && args.size() == 1) {
      Val v = boolean(args[0].k == Val::Bool && args[0].known >= 0 ? !args[0].known : -1);
      v.from = from;
      v.truth = args[0].truth;
      return v;
    }
    if (fn == "item" && !args.empty() && is_data(args[0])) return scalar_hit(of(Val::Float), "item()");
    if (fn == "is_nonzero" && !args.empty() && is_tensor(args[0])) {
      Val v = boolean(-1);
      v.from.insert(hit(FlowKind::IsNonzero, "aten._local_scalar_dense"));
      return v;
    }
    if ((fn == "equal" || fn == "allclose") && args.size() >= 2 && (is_data(args[0]) || is_data(args[1]))) {
      Val v = boolean(-1);
      v.from.insert(hit(FlowKind::Equal, "aten." + fn));
      return v;
    }
    if (one_of(fn, {"lstm", "gru", "rnn_tanh", "rnn_relu"})) {
      const std::string& q = cur_fn_->qualified;
      const size_t dot = q.rfind('.');
      const std::string cls = dot == std::string::npos ? q : q.substr(0, dot);
      hit(FlowKind::Rnn, cls.substr(cls.rfind('.') + 1));
      return of(Val::Tuple);
    }
    bool any_tensor = false, all_fixed = true;
    Val::DType first = Val::AnyDtype;
    for (const Val& a : args)
      if (is_tensor(a)) {
        if (!any_tensor) first = a.dtype;
        any_tensor = true;
        all_fixed = all_fixed && a.fixed;
      }
    if (any_tensor) {
      const std::string dyn = dynamic_shape_op(fn, args);
      if (!dyn.empty()) hit(FlowKind::DynamicShape, dyn);
    }
    // a data-dependent number used as a size or a bound
    static const std::initializer_list<std::string_view> sized{
        "slice", "narrow", "view", "reshape", "expand", "repeat", "zeros", "ones", "empty", "full", "arange", "new_zeros",
        "new_ones", "new_empty", "new_full", "rand", "randn", "randint", "split", "chunk", "tensor_split", "unflatten",
        "select", "index_select", "resize_", "pad", "roll", "topk", "kthvalue"};
    if (one_of(fn, sized))
      for (size_t k = (fn == "zeros" || fn == "ones" || fn == "empty" || fn == "full" || fn == "arange" || fn == "rand" ||
                       fn == "randn" || fn == "randint") ? 0 : 1;
           k < args.size(); ++k)
        mark(args[k], false, true);
    for (const auto& kw : kwargs)
      if (one_of(fn, sized)) mark(kw.second, false, true);

    static const std::initializer_list<std::string_view> non_tensor{
        "size", "dim", "len", "numel", "is_floating_point", "is_complex", "is_grad_enabled", "is_autocast_enabled",
        "format", "append", "keys", "values", "items", "get", "list", "str", "device", "element_size", "stride",
        "is_contiguous", "get_device", "__contains__", "is_scripting", "_get_tracing_state", "is_inference_mode_enabled",
        "is_autocast_cpu_enabled", "extend", "insert", "pop", "copy", "clear", "__getitem__", "manual_seed", "sym_size",
        "floordiv", "__range_length", "__derive_index", "is_nested", "_has_torch_function", "_is_scripting", "has_torch_function"};
    if (one_of(fn, non_tensor)) {
      Val v = of(fn == "size" || fn == "stride" ? Val::List : one_of(fn, {"dim", "len", "numel", "element_size", "get_device"}) ? Val::Int
                 : one_of(fn, {"is_floating_point", "is_complex", "is_grad_enabled", "is_autocast_enabled", "is_contiguous",
                               "__contains__", "is_nested"})
                     ? Val::Bool
                     : Val::Unknown);
      if (v.k == Val::List) v.items.push_back(of(Val::Int));
      if (fn == "size" && args.size() == 2) v = of(Val::Int);
      v.from = from;
      return v;
    }
    static const std::initializer_list<std::string_view> creators{
        "zeros", "ones", "empty", "full", "tensor", "arange", "rand", "randn", "randint", "eye", "linspace", "logspace",
        "scalar_tensor", "as_tensor", "empty_strided", "randperm", "zeros_like", "ones_like", "empty_like", "full_like",
        "rand_like", "randn_like", "from_numpy", "stack", "cat", "concat"};
    static const std::initializer_list<std::string_view> comparisons{
        "eq", "ne", "lt", "gt", "le", "ge", "logical_and", "logical_or", "logical_not", "logical_xor", "isnan", "isinf",
        "isfinite", "isneginf", "isposinf", "any", "all", "__and__", "__or__", "__xor__", "bitwise_not", "isin", "signbit",
        "isclose", "gt_", "lt_", "eq_", "ne_", "ge_", "le_"};
    static const std::initializer_list<std::string_view> integers{
        "argmax", "argmin", "argsort", "nonzero", "argwhere", "bincount", "searchsorted", "bucketize", "histc_int",
        "floor_divide", "_unique2", "unique_dim", "unique_consecutive", "randperm", "randint", "count_nonzero"};
    if (any_tensor || one_of(fn, creators)) {
      Val::DType d = first;
      if (one_of(fn, comparisons)) d = Val::Boolean;
      else if (one_of(fn, integers)) d = Val::Integer;
      else if (fn == "to" || fn == "type") d = Val::AnyDtype;
      for (size_t k = 1; k < nodes.size() && (fn == "to" || fn == "type"); ++k)
        if (nodes[k]->k == Node::Num) d = dtype_of_code(nodes[k]->s);
      for (const auto& kw : kwargs)
        if (kw.first == "dtype") d = Val::AnyDtype;
      if (one_of(fn, {"sum", "cumsum", "prod"}) && d == Val::Boolean) d = Val::Integer;
      if (one_of(fn, {"div", "mean", "softmax", "sigmoid", "sqrt", "exp", "log", "tanh"}) && d != Val::Floating) d = Val::AnyDtype;
      if (one_of(fn, {"_unique2", "unique_dim", "unique_consecutive", "sort", "topk", "max", "min", "lstm", "gru", "kthvalue",
                      "std_mean", "var_mean", "split", "chunk", "unbind", "tensor_split", "broadcast_tensors", "meshgrid"})) {
        Val v = of(one_of(fn, {"split", "chunk", "unbind", "tensor_split", "broadcast_tensors", "meshgrid"}) ? Val::List : Val::Tuple);
        if (v.k == Val::List) v.items.push_back(tensor(d));
        else v.items = {tensor(d), tensor(Val::Integer), tensor(Val::Integer)};
        if (fn == "max" || fn == "min") {
          if (args.size() == 1) return tensor(d);
          if (args.size() == 2 && is_tensor(args[1])) return tensor(d);
        }
        return v;
      }
      Val r = tensor(d);
      r.fixed = any_tensor && all_fixed;
      return r;
    }
    // every argument a number: the result is one too (torch.add(n, 1), torch.gt(n, 2), ...)
    Val v;
    if (one_of(fn, comparisons) || one_of(fn, {"__not__", "__and__", "__or__"})) v = boolean(-1);
    else if (std::all_of(args.begin(), args.end(), [](const Val& a) { return a.k == Val::Int; }) && !args.empty()) v = of(Val::Int);
    else if (std::all_of(args.begin(), args.end(), [](const Val& a) { return a.k == Val::Int || a.k == Val::Float; }) && !args.empty())
      v = of(Val::Float);
    else v = of(Val::Unknown);
    v.from = from;
    return v;
  }

  const Checkpoint& ck_;
  std::unordered_map<std::string, const TsClass*> classes_;
  std::unordered_map<std::string, std::unique_ptr<Function>> functions_;
  std::unordered_map<std::string, Val> memo_;
  std::set<std::string> active_;
  std::unordered_map<std::string, size_t> sites_;
  std::vector<FlowHit> hits_;
  std::set<size_t> asserts_;  // bool() hits that only an assert reads
  std::string entry_;
  const Stmt* cur_ = nullptr;
  const Function* cur_fn_ = nullptr;
  bool raised_ = false;
  int depth_ = 0;
  size_t contexts_ = 0;
  size_t budget_ = 4'000'000;  // statements interpreted in all: bounds the time a hostile archive can take
};

}  // namespace
}  // namespace tsflow

std::vector<FlowHit> compile_flow(const Checkpoint& ck) { return tsflow::Flow(ck).run(); }

}  // namespace ckpt
