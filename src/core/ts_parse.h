// The Python that TorchScript prints (code/*.py of an archive) as ts_flow.cc reads it: expressions into
// Node trees, lines into statements with their blocks. Nothing is run; what does not parse is Unknown.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/checkpoint.h"

namespace ckpt::tsflow {

// ---- expressions ----

struct Node {
  enum Kind : uint8_t { Name, Num, Str, Attr, Call, Sub, Tuple, List, Dict, Bin, Unary, Kw, Ternary, Unknown } k = Unknown;
  std::string s;  // Name: the name; Num / Str: the literal (Str unquoted); Attr: the attribute; Bin / Unary: the
                  // operator; Kw: the keyword
  std::vector<Node> a;  // Attr: [object]; Call: [callee, args...]; Sub: [object, index]; Bin: [l, r]; Unary: [x];
                        // Kw: [value]; Ternary: [then, cond, else]; Tuple / List / Dict: the items
};

// An expression (with `list`, a comma-separated list of them: a Tuple) of the whole text; Node{} (Unknown)
// when the text is not one.
Node parse_expr(std::string_view text, bool list = false);

// An assignment statement "a, b = expr, expr": its targets (none for an expression statement) and value;
// nullopt when the text is not one whole.
struct Assignment {
  std::vector<std::string> targets;
  Node value;
};
std::optional<Assignment> parse_assignment(std::string_view text);

// "torch.nn.functional.relu" for a chain of names, "" for anything else.
std::string dotted(const Node& n);

// ---- statements ----

struct Stmt {
  const TsLine* line = nullptr;
  std::string text;  // the statement (continuation lines joined)
  std::vector<Stmt> body, orelse;
};

bool opens_block(std::string_view t);
// The statements of the block at `indent` from line k on (k moves past them): continuation lines joined,
// nested blocks as bodies, elif / else as the if's orelse.
std::vector<Stmt> parse_block(const std::vector<TsLine>& lines, size_t& k, uint32_t indent, int depth = 0);

}  // namespace ckpt::tsflow
