#pragma once

// Criteo TSV lines for the tests: written by hand, or good ones made from a
// number, and the model's table sizes they are hashed into.

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "tools/train/data/criteo_line.h"

namespace ember::train::testing {

// A Criteo line from its label, 13 integers and 26 categoricals.
inline std::string Line(const std::string& label, const std::vector<std::string>& ints,
                        const std::vector<std::string>& cats) {
  std::string line = label;
  for (int j = 0; j < kCriteoNumDense; ++j)
    line += "\t" + (j < static_cast<int>(ints.size()) ? ints[j] : "");
  for (int t = 0; t < kCriteoNumSparse; ++t)
    line += "\t" + (t < static_cast<int>(cats.size()) ? cats[t] : "");
  return line + "\n";
}

// A good line whose values depend on `i`, with some empty fields and
// negative integers.
inline std::string GoodLine(int i) {
  std::vector<std::string> ints, cats;
  for (int j = 0; j < kCriteoNumDense; ++j) {
    const int v = (i * 7 + j) % 50;
    ints.push_back((i + j) % 11 == 0   ? ""
                   : (i + j) % 13 == 0 ? "-" + std::to_string(v)
                                       : std::to_string(v * v * v));
  }
  char hex[16];
  for (int t = 0; t < kCriteoNumSparse; ++t) {
    std::snprintf(hex, sizeof(hex), "%08x", static_cast<unsigned>(i * 2654435761u + t * 40503u));
    cats.emplace_back((i + t) % 9 == 0 ? "" : hex);
  }
  return Line(i % 3 == 0 ? "1" : "0", ints, cats);
}

inline std::string GoodLines(int first, int count) {
  std::string text;
  for (int i = first; i < first + count; ++i) text += GoodLine(i);
  return text;
}

inline std::vector<int64_t> Rows() {
  std::vector<int64_t> rows;
  for (int t = 0; t < kCriteoNumSparse; ++t) rows.push_back(1000 + 37 * t);
  return rows;
}

}  // namespace ember::train::testing
