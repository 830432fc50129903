#pragma once

// The text form of a Table, as every bench prints it on stdout:
//
//   <title>
//   case                                     unit      <column> <column> ...
//   -----------------------------------------------------------------------
//   <label>                                  <unit>       <value>  <value>
//   <notes, one a line>
//
//   <targets title>:
//     <name>                                <measured>   >= <goal>   PASS
//
// Values print by unit: rates ("/s") and counts with thousands separators,
// ratios ("x") as 1.23x, the rest with two decimals; "-" where a column did
// not run the case.
//
// Thread safety: thread-compatible; output is not interleaved with other
// writers of the same stream.

#include <cstdio>
#include <string>
#include <vector>

#include "tools/bench/common/table.h"

namespace ember::bench {

// `value` as the table shows it in `unit`.
[[nodiscard]] std::string FormatValue(const std::string& unit, double value);

// `value` with thousands separators, no decimals ("1,500,829").
[[nodiscard]] std::string WithCommas(double value);

// Prints `table` (nothing when it has no rows and no notes), then its
// targets.
void PrintTable(const Table& table, std::FILE* out = stdout);

// Prints `tables` one after another, a blank line apart.
void PrintTables(const std::vector<Table>& tables, std::FILE* out = stdout);

}  // namespace ember::bench
