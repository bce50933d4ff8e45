// What a rule fixture's expected.json says `check` must find ({"findings": [{id, where_contains,
// where_excludes}], "clean": bool}), checked against what it found: every expected finding fires with its
// `where`, and nothing else does (false positives are bugs). Shared by the check and .pt2 check tests.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/checkpoint.h"

namespace ckpt::test {

// Informational findings of `summary` that the rule fixtures do not list.
inline bool informational(const std::string& id) {
  return id == "tied-weights" || id == "storage-views" || id == "frozen-module";
}

inline bool where_has(const Finding& f, const std::string& s) {
  return std::any_of(f.where.begin(), f.where.end(), [&](const std::string& w) { return w.find(s) != std::string::npos; });
}

inline void expect_findings(const std::vector<Finding>& found, const nlohmann::json& want) {
  using nlohmann::json;
  std::set<std::string> want_ids;
  for (const auto& e : want.value("findings", json::array())) {
    const std::string id = e["id"];
    want_ids.insert(id);
    CAPTURE(id);
    bool matched = false;
    for (const Finding& f : found) {
      if (f.id != id) continue;
      bool ok = true;
      for (const auto& s : e.value("where_contains", json::array())) ok &= where_has(f, s.get<std::string>());
      for (const auto& s : e.value("where_excludes", json::array())) ok &= !where_has(f, s.get<std::string>());
      matched |= ok;
    }
    CHECK(matched);
  }
  for (const Finding& f : found) {
    if (informational(f.id)) continue;
    CAPTURE(f.message);
    CHECK(want_ids.count(f.id) == 1);  // anything else is a false positive
  }
  if (want.value("clean", false)) {
    size_t n = 0;
    for (const Finding& f : found) n += !informational(f.id);
    CHECK(n == 0);
  }
}

}  // namespace ckpt::test
