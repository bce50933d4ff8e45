#include "core/ts_parse.h"

#include <algorithm>
#include <cctype>
#include <utility>

namespace ckpt::tsflow {
namespace {




struct Tok {
  enum Kind : uint8_t { End, Ident, Num, Str, Op } k = End;
  std::string s;
};

std::vector<Tok> tokenize(std::string_view t) {
  std::vector<Tok> out;
  size_t i = 0;
  while (i < t.size()) {
    const char c = t[i];
    if (c == ' ' || c == '\t') {
      ++i;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < t.size() && (std::isalnum(static_cast<unsigned char>(t[j])) || t[j] == '_')) ++j;
      out.push_back({Tok::Ident, std::string(t.substr(i, j - i))});
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(c)) || (c == '.' && i + 1 < t.size() && std::isdigit(static_cast<unsigned char>(t[i + 1])))) {
      size_t j = i;
      while (j < t.size() && (std::isalnum(static_cast<unsigned char>(t[j])) || t[j] == '.' ||
                              ((t[j] == '-' || t[j] == '+') && (t[j - 1] == 'e' || t[j - 1] == 'E'))))
        ++j;
      out.push_back({Tok::Num, std::string(t.substr(i, j - i))});
      i = j;
    } else if (c == '"' || c == '\'') {
      std::string s;
      size_t j = i + 1;
      while (j < t.size() && t[j] != c) {
        if (t[j] == '\\' && j + 1 < t.size()) ++j;
        s += t[j++];
      }
      out.push_back({Tok::Str, std::move(s)});
      i = j + 1;
    } else {
      static const char* two[] = {"==", "!=", "<=", ">=", "->", "//", "**", "<<", ">>"};
      std::string op(1, c);
      for (const char* o : two)
        if (t.substr(i, 2) == o) op = o;
      out.push_back({Tok::Op, op});
      i += op.size();
    }
  }
  return out;
}

class Parser {
 public:
  explicit Parser(std::vector<Tok> toks) : t_(std::move(toks)) {}
  bool at_end() const { return p_ >= t_.size(); }
  bool ok() const { return ok_; }

  Node expr() {
    if (++depth_ > 256) return fail();  // nesting this deep is no serialized code: hostile input
    struct Leave {
      int& d;
      ~Leave() { --d; }
    } leave{depth_};
    Node e = or_expr();
    if (is_ident("if")) {  // a if c else b
      ++p_;
      Node c = or_expr();
      if (!eat_ident("else")) return fail();
      Node f = expr();
      return Node{Node::Ternary, "", {std::move(e), std::move(c), std::move(f)}};
    }
    return e;
  }

  // a, b  /  a, b,  : a tuple without parentheses, as assignments and returns write them.
  Node expr_list() {
    Node e = expr();
    if (!is_op(",")) return e;
    Node t{Node::Tuple, "", {std::move(e)}};
    while (eat_op(",") && !at_end()) t.a.push_back(expr());
    return t;
  }

  // a, b, = ...  /  a : T = ...  : the names assigned, empty when this is no assignment.
  std::vector<std::string> targets() {
    std::vector<std::string> names;
    size_t q = 0;
    while (q < t_.size()) {
      if (t_[q].k != Tok::Ident) return {};
      names.push_back(t_[q].s);
      ++q;
      if (q < t_.size() && is_op_at(q, ",")) {
        ++q;
        if (q < t_.size() && is_op_at(q, "=")) break;  // a, b, = ...
        continue;
      }
      break;
    }
    if (q < t_.size() && is_op_at(q, ":")) {  // an annotated local: skip the type
      int depth = 0;
      for (++q; q < t_.size(); ++q) {
        if (is_op_at(q, "[")) ++depth;
        if (is_op_at(q, "]")) --depth;
        if (depth == 0 && is_op_at(q, "=")) break;
      }
    }
    if (q >= t_.size() || !is_op_at(q, "=")) return {};
    p_ = q + 1;
    return names;
  }

 private:
  bool is_op_at(size_t q, const char* o) const { return t_[q].k == Tok::Op && t_[q].s == o; }
  bool is_op(const char* o) const { return p_ < t_.size() && is_op_at(p_, o); }
  bool is_ident(const char* s) const { return p_ < t_.size() && t_[p_].k == Tok::Ident && t_[p_].s == s; }
  bool eat_op(const char* o) {
    if (!is_op(o)) return false;
    ++p_;
    return true;
  }
  bool eat_ident(const char* s) {
    if (!is_ident(s)) return false;
    ++p_;
    return true;
  }
  Node fail() {
    ok_ = false;
    p_ = t_.size();
    return Node{};
  }

  // a word b word c ...: `word` ("or", "and") between operands that `operand` reads, left-associative.
  Node keyword_chain(const char* word, Node (Parser::*operand)()) {
    Node l = (this->*operand)();
    for (int n = 0; eat_ident(word); ++n) {
      if (n > 256) return fail();
      l = Node{Node::Bin, word, {std::move(l), (this->*operand)()}};
    }
    return l;
  }
  Node or_expr() { return keyword_chain("or", &Parser::and_expr); }
  Node and_expr() { return keyword_chain("and", &Parser::not_expr); }
  Node not_expr() {
    if (depth_ > 256) return fail();
    if (eat_ident("not")) {
      ++depth_;
      Node n{Node::Unary, "not", {not_expr()}};
      --depth_;
      return n;
    }
    return comparison();
  }
  Node comparison() {
    Node l = arith();
    for (int n = 0;; ++n) {
      if (n > 256) return fail();
      std::string op;
      if (is_op("==") || is_op("!=") || is_op("<") || is_op(">") || is_op("<=") || is_op(">=")) {
        op = t_[p_++].s;
      } else if (eat_ident("is")) {
        op = eat_ident("not") ? "is not" : "is";
      } else if (eat_ident("in")) {
        op = "in";
      } else if (is_ident("not") && p_ + 1 < t_.size() && t_[p_ + 1].s == "in") {
        p_ += 2;
        op = "not in";
      } else {
        return l;
      }
      l = Node{Node::Bin, op, {std::move(l), arith()}};
    }
  }
  Node arith() {
    Node l = term();
    for (int n = 0; is_op("+") || is_op("-") || is_op("|") || is_op("&") || is_op("^") || is_op("<<") || is_op(">>"); ++n) {
      if (n > 256) return fail();
      std::string op = t_[p_++].s;
      l = Node{Node::Bin, op, {std::move(l), term()}};
    }
    return l;
  }
  Node term() {
    Node l = unary();
    for (int n = 0; is_op("*") || is_op("/") || is_op("//") || is_op("%") || is_op("@"); ++n) {
      if (n > 256) return fail();
      std::string op = t_[p_++].s;
      l = Node{Node::Bin, op, {std::move(l), unary()}};
    }
    return l;
  }
  Node unary() {
    if (depth_ > 256) return fail();
    if (is_op("-") || is_op("+") || is_op("~")) {
      std::string op = t_[p_++].s;
      ++depth_;
      Node n{Node::Unary, op, {unary()}};
      --depth_;
      return n;
    }
    Node b = postfix();
    if (eat_op("**")) {
      ++depth_;
      Node n{Node::Bin, "**", {std::move(b), unary()}};
      --depth_;
      return n;
    }
    return b;
  }
  Node postfix() {
    Node e = atom();
    for (int links = 0;; ++links) {
      if (links > 256) return fail();  // a.b.c... or f()()... this long: hostile input
      if (eat_op(".")) {
        if (p_ >= t_.size() || t_[p_].k != Tok::Ident) return fail();
        e = Node{Node::Attr, t_[p_++].s, {std::move(e)}};
      } else if (eat_op("(")) {
        Node call{Node::Call, "", {std::move(e)}};
        while (!eat_op(")")) {
          if (at_end()) return fail();
          if (p_ + 1 < t_.size() && t_[p_].k == Tok::Ident && is_op_at(p_ + 1, "=")) {
            std::string kw = t_[p_].s;
            p_ += 2;
            call.a.push_back(Node{Node::Kw, kw, {expr()}});
          } else {
            call.a.push_back(expr());
          }
          if (!eat_op(",") && !is_op(")")) return fail();
        }
        e = std::move(call);
      } else if (eat_op("[")) {
        Node idx = slice_or_expr();
        while (eat_op(",")) idx = Node{Node::Tuple, "", {std::move(idx), slice_or_expr()}};
        if (!eat_op("]")) return fail();
        e = Node{Node::Sub, "", {std::move(e), std::move(idx)}};
      } else {
        return e;
      }
    }
  }
  Node slice_or_expr() {
    if (is_op(":") || is_op("]")) {
      while (!is_op("]") && !is_op(",") && !at_end()) ++p_;
      return Node{};
    }
    Node e = expr();
    if (is_op(":")) {
      while (!is_op("]") && !is_op(",") && !at_end()) ++p_;
      return Node{};
    }
    return e;
  }
  Node atom() {
    if (at_end()) return fail();
    const Tok& tk = t_[p_];
    if (tk.k == Tok::Ident) {
      ++p_;
      return Node{Node::Name, tk.s, {}};
    }
    if (tk.k == Tok::Num) {
      ++p_;
      return Node{Node::Num, tk.s, {}};
    }
    if (tk.k == Tok::Str) {
      ++p_;
      Node n{Node::Str, tk.s, {}};
      while (p_ < t_.size() && t_[p_].k == Tok::Str) n.s += t_[p_++].s;  // "a" "b"
      return n;
    }
    if (eat_op("(")) return items(")", Node::Tuple, true);
    if (eat_op("[")) return items("]", Node::List, false);
    if (eat_op("{")) return items("}", Node::Dict, false);
    return fail();
  }
  Node items(const char* close, Node::Kind kind, bool paren) {
    Node n{kind, "", {}};
    bool comma = false;
    while (!eat_op(close)) {
      if (at_end()) return fail();
      n.a.push_back(expr());
      if (kind == Node::Dict && eat_op(":")) n.a.push_back(expr());
      if (eat_op(",")) comma = true;
      else if (!is_op(close)) return fail();
    }
    if (paren && n.a.size() == 1 && !comma) return std::move(n.a[0]);  // (x): a parenthesized expression
    return n;
  }

  std::vector<Tok> t_;
  size_t p_ = 0;
  bool ok_ = true;
  int depth_ = 0;
};


}  // namespace

Node parse_expr(std::string_view text, bool list) {
  Parser p(tokenize(text));
  Node n = list ? p.expr_list() : p.expr();
  return p.ok() && p.at_end() ? n : Node{};
}

std::optional<Assignment> parse_assignment(std::string_view text) {
  Parser p(tokenize(text));
  Assignment a;
  a.targets = p.targets();
  a.value = p.expr_list();
  if (!p.ok() || !p.at_end()) return std::nullopt;
  return a;
}

std::string dotted(const Node& n) {
  if (n.k == Node::Name) return n.s;
  if (n.k == Node::Attr) {
    std::string base = dotted(n.a[0]);
    return base.empty() ? "" : base + "." + n.s;
  }
  return "";
}




static int paren_balance(std::string_view s) {
  int n = 0;
  char quote = 0;
  for (size_t k = 0; k < s.size(); ++k) {
    const char c = s[k];
    if (quote) {
      if (c == '\\') ++k;
      else if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else {
      n += (c == '(' || c == '[' || c == '{') ? 1 : (c == ')' || c == ']' || c == '}') ? -1 : 0;
    }
  }
  return n;
}

bool opens_block(std::string_view t) { return !t.empty() && t.back() == ':'; }

std::vector<Stmt> parse_block(const std::vector<TsLine>& lines, size_t& k, uint32_t indent, int depth) {
  std::vector<Stmt> out;
  while (k < lines.size() && lines[k].indent >= indent) {
    if (lines[k].indent > indent) {  // deeper than expected: read it as part of the statement before
      ++k;
      continue;
    }
    Stmt s{&lines[k], lines[k].text, {}, {}};
    ++k;
    int bal = paren_balance(s.text);
    while (bal > 0 && k < lines.size()) {
      s.text += " " + lines[k].text;
      bal += paren_balance(lines[k].text);
      ++k;
    }
    if (opens_block(s.text) && k < lines.size() && lines[k].indent > indent && depth < 200)
      s.body = parse_block(lines, k, lines[k].indent, depth + 1);
    if ((s.text == "else:" || s.text.rfind("elif ", 0) == 0) && !out.empty() && out.back().text.rfind("if ", 0) == 0 &&
        out.back().orelse.empty()) {
      if (s.text == "else:") {
        out.back().orelse = std::move(s.body);
      } else {  // elif c:  ==  else: if c:
        s.text = s.text.substr(2);
        out.back().orelse.push_back(std::move(s));
      }
      continue;
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace ckpt::tsflow
