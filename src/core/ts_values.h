// The abstract values ts_flow.cc's interpreter follows through TorchScript's code: what kind a value is
// (a tensor of which dtype, a bool known or not, a tuple...) and which hits its data came from.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace ckpt::tsflow {


struct Val {
  enum Kind : uint8_t { Unknown, Tensor, None, Bool, Int, Float, Str, Obj, Func, Tuple, List } k = Unknown;
  enum DType : uint8_t { AnyDtype, Integer, Boolean, Floating } dtype = AnyDtype;  // Tensor
  int8_t known = -1;  // Bool: 0 / 1 when known
  bool maybe_none = false;  // Optional[...]
  bool fixed = false;  // Tensor: holds no input data (a size wrapped by a trace's prim::NumToTensor, a constant)
  std::string ref;  // Obj: its class; Func: the function; Str: the text
  std::vector<Val> items;  // Tuple: each item; List: one item, the element
  std::set<size_t> from;  // the hits (indexes) whose data-dependent value this carries
  size_t truth = SIZE_MAX;  // a Bool made by bool(tensor): that hit
};

inline Val of(Val::Kind k) {
  Val v;
  v.k = k;
  return v;
}
inline Val tensor(Val::DType d = Val::AnyDtype) {
  Val v = of(Val::Tensor);
  v.dtype = d;
  return v;
}
inline Val boolean(int8_t known) {
  Val v = of(Val::Bool);
  v.known = known;
  return v;
}
inline bool is_tensor(const Val& v) { return v.k == Val::Tensor && !v.maybe_none; }
// A tensor whose value comes from the input's data (not a traced size, not a constant).
inline bool is_data(const Val& v) { return is_tensor(v) && !v.fixed; }

// `a is b` (is_ == true) or `a is not b` where one side is None: 1 / 0 when the other side's type
// decides it, -1 when it may or may not be None (or neither side is None).
inline int8_t is_none_test(const Val& a, const Val& b, bool is_) {
  if (a.k != Val::None && b.k != Val::None) return -1;
  const Val& other = a.k == Val::None ? b : a;
  if (other.k != Val::None && (other.maybe_none || other.k == Val::Unknown)) return -1;
  const bool same = other.k == Val::None;
  return static_cast<int8_t>(is_ ? same : !same);
}

inline Val join(const Val& a, const Val& b) {
  if (a.k == Val::None && b.k != Val::None) {
    Val v = b;
    v.maybe_none = true;
    return v;
  }
  if (b.k == Val::None && a.k != Val::None) return join(b, a);
  Val v = a;
  v.from.insert(b.from.begin(), b.from.end());
  if (a.k != b.k) {
    v = of(Val::Unknown);
    v.from = a.from;
    v.from.insert(b.from.begin(), b.from.end());
    return v;
  }
  v.maybe_none = a.maybe_none || b.maybe_none;
  if (a.dtype != b.dtype) v.dtype = Val::AnyDtype;
  v.fixed = a.fixed && b.fixed;
  if (a.known != b.known) v.known = -1;
  if (a.ref != b.ref) v.ref.clear();
  if (a.truth != b.truth) v.truth = a.truth == SIZE_MAX ? b.truth : a.truth;
  if (a.items.size() == b.items.size())
    for (size_t k = 0; k < a.items.size(); ++k) v.items[k] = join(a.items[k], b.items[k]);
  else
    v.items.clear();
  return v;
}

inline std::vector<std::string> split_top(std::string_view s, char sep) {
  std::vector<std::string> out;
  int depth = 0;
  size_t start = 0;
  for (size_t k = 0; k <= s.size(); ++k) {
    if (k == s.size() || (s[k] == sep && depth == 0)) {
      std::string_view item = s.substr(start, k - start);
      while (!item.empty() && (item.front() == ' ' || item.front() == '\n')) item.remove_prefix(1);
      while (!item.empty() && (item.back() == ' ' || item.back() == '\n')) item.remove_suffix(1);
      if (!item.empty()) out.emplace_back(item);
      start = k + 1;
    } else if (s[k] == '[' || s[k] == '(') {
      ++depth;
    } else if (s[k] == ']' || s[k] == ')') {
      --depth;
    }
  }
  return out;
}

// A TorchScript type as printed: "Tensor", "Optional[Tensor]", "Tuple[Tensor, int]", "__torch__.m.Net".
inline Val of_type(std::string_view t, int depth = 0) {
  if (depth > 32) return of(Val::Unknown);
  while (!t.empty() && t.front() == ' ') t.remove_prefix(1);
  while (!t.empty() && t.back() == ' ') t.remove_suffix(1);
  auto inner = [&](size_t open) { return t.substr(open + 1, t.size() - open - 2); };
  if (t == "Tensor") return tensor();
  if (t == "int") return of(Val::Int);
  if (t == "float" || t == "number" || t == "Scalar") return of(Val::Float);
  if (t == "bool") return of(Val::Bool);
  if (t == "str") return of(Val::Str);
  if (t == "NoneType") return of(Val::None);
  if (t.rfind("Optional[", 0) == 0 && t.back() == ']') {
    Val v = of_type(inner(8), depth + 1);
    v.maybe_none = true;
    return v;
  }
  if ((t.rfind("Tuple[", 0) == 0 || t.rfind("List[", 0) == 0) && t.back() == ']') {
    const bool tuple = t[0] == 'T';
    Val v = of(tuple ? Val::Tuple : Val::List);
    for (const std::string& item : split_top(inner(t.find('[')), ',')) v.items.push_back(of_type(item, depth + 1));
    if (!tuple && v.items.size() != 1) v.items.clear();
    return v;
  }
  if (t.rfind("__torch__.", 0) == 0) {
    Val v = of(Val::Obj);
    v.ref = std::string(t);
    return v;
  }
  return of(Val::Unknown);
}

// aten ScalarType codes as TorchScript prints dtypes: torch.to(x, 4) is int64.
inline Val::DType dtype_of_code(const std::string& code) {
  if (code == "11") return Val::Boolean;
  if (code == "0" || code == "1" || code == "2" || code == "3" || code == "4") return Val::Integer;
  if (code == "5" || code == "6" || code == "7" || code == "15") return Val::Floating;
  return Val::AnyDtype;
}

inline bool one_of(std::string_view s, std::initializer_list<std::string_view> set) {
  return std::find(set.begin(), set.end(), s) != set.end();
}

// The aten operator dynamo names for a torch.* call with a data-dependent output shape, "" if none.
inline std::string dynamic_shape_op(std::string_view fn, const std::vector<Val>& args) {
  if (one_of(fn, {"nonzero", "argwhere", "nonzero_numpy"})) return "aten.nonzero";
  if (fn == "masked_select") return "aten.masked_select";
  if (fn == "_unique2" || fn == "unique") return "aten._unique2";
  if (fn == "unique_dim") return "aten.unique_dim";
  if (fn == "unique_consecutive") return "aten.unique_consecutive";
  if (fn == "bincount") return "aten.bincount";
  if (fn == "where" && args.size() == 1) return "aten.nonzero";
  if (fn == "repeat_interleave" && (args.size() == 1 || (args.size() > 1 && is_tensor(args[1]))))
    return "aten.repeat_interleave.Tensor";
  if (fn == "index" && args.size() > 1)  // x[mask]: a bool tensor among the indices
    for (const Val& i : args[1].items)
      if (i.k == Val::Tensor && i.dtype == Val::Boolean) return "aten.nonzero";
  return "";
}

}  // namespace ckpt::tsflow
