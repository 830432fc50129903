// The tables of ember-bench-ops (ops_cases.h): one per shape with Ember,
// PyTorch and the gather side by side, then the targets, each evaluated on
// every shape and reported for the worst one. No CUDA here: the stub build
// links it too.

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "tools/bench/common/table_printer.h"
#include "tools/bench/ops/ops_cases.h"

namespace ember::bench {
namespace {

constexpr char kEmber[] = "Ember";
constexpr char kTorch[] = "PyTorch";
constexpr char kGather[] = "gather";

std::string ShapeName(const OpsShape& s) {
  return absl::StrFormat("T=%d L=%d B=%d", s.tables, s.pooling, s.batch);
}

std::optional<double> Ms(const std::map<std::string, Timing>& timings, const std::string& name) {
  auto it = timings.find(name);
  if (it == timings.end()) return std::nullopt;
  return it->second.ms;
}

// PyTorch's faster variant of a backward case, and its name.
std::optional<std::pair<double, std::string>> BestTorch(const ShapeResult& r,
                                                        const std::string& name) {
  std::optional<std::pair<double, std::string>> best;
  for (const char* variant : {"_sparse", "_dense"}) {
    const std::string key = name + variant;
    if (auto ms = Ms(r.torch, key); ms && (!best || *ms < best->first)) best = {{*ms, key}};
  }
  return best;
}

// The ratios the targets check, per shape; absent when a side is missing.
struct ShapeRatios {
  std::optional<double> forward_vs_torch, forward_vs_gather_pct, validate_kept_pct;
  std::optional<double> sgd_vs_torch, adagrad_vs_torch, sgd_det_vs_torch, adagrad_det_vs_torch;
};

// The validated forward's throughput as a share of the plain one's: the
// median of the runs' ratios where the two were timed run by run
// (MeasureEnginePaired), else the ratio of the medians.
double KeptPct(const ShapeResult& r, double plain_ms, double validated_ms) {
  const std::vector<double>& plain = r.ember.at("forward").runs;
  const std::vector<double>& validated = r.ember.at("forward_validate").runs;
  if (plain.empty() || plain.size() != validated.size()) return 100 * plain_ms / validated_ms;
  std::vector<double> ratios;
  for (size_t i = 0; i < plain.size(); ++i) ratios.push_back(100 * plain[i] / validated[i]);
  return Percentile(ratios, 0.5);
}

ShapeRatios Ratios(const ShapeResult& r) {
  ShapeRatios q;
  auto ember = [&](const char* name) { return Ms(r.ember, name); };
  if (auto e = ember("forward")) {
    if (auto t = Ms(r.torch, "forward")) q.forward_vs_torch = *t / *e;
    if (auto g = ember("gather")) {
      q.forward_vs_gather_pct = 100 * (r.forward_bytes / *e) / (r.gather_bytes / *g);
    }
    if (auto v = ember("forward_validate")) q.validate_kept_pct = KeptPct(r, *e, *v);
  }
  const std::pair<std::optional<double>*, const char*> backward[] = {
      {&q.sgd_vs_torch, "sgd"},
      {&q.adagrad_vs_torch, "adagrad"},
      {&q.sgd_det_vs_torch, "sgd_det"},
      {&q.adagrad_det_vs_torch, "adagrad_det"}};
  for (const auto& [ratio, name] : backward) {
    const std::string base = std::string(name).substr(0, std::string(name).find('_'));
    auto e = ember(name);
    auto t = BestTorch(r, base);
    if (e && t) *ratio = t->first / *e;
  }
  return q;
}

Table ShapeTable(const ShapeResult& r) {
  Table table;
  table.title = absl::StrFormat("TBE %s: %s lookups, %s distinct rows (%.1f%%)", ShapeName(r.shape),
                                WithCommas(double(r.lookups)), WithCommas(double(r.distinct_rows)),
                                100.0 * double(r.distinct_rows) / double(r.lookups));
  table.columns = {kEmber, kTorch, kGather};
  const std::string prefix =
      absl::StrFormat("T%d_L%d_B%d.", r.shape.tables, r.shape.pooling, r.shape.batch);
  auto add = [&](const std::string& key, const char* unit, const std::string& label,
                 std::map<std::string, double> values) {
    if (!values.empty()) table.rows.push_back({prefix + key, unit, label, std::move(values)});
  };
  auto put = [](std::map<std::string, double>* values, const char* column,
                std::optional<double> value) {
    if (value) (*values)[column] = *value;
  };
  auto gbs = [](std::optional<double> ms, double bytes) -> std::optional<double> {
    if (!ms) return std::nullopt;
    return bytes / *ms / 1e6;
  };
  const ShapeRatios q = Ratios(r);

  std::map<std::string, double> v;
  put(&v, kEmber, Ms(r.ember, "forward"));
  put(&v, kTorch, Ms(r.torch, "forward"));
  put(&v, kGather, Ms(r.ember, "gather"));
  add("forward_ms", "ms", "forward", std::exchange(v, {}));
  put(&v, kEmber, gbs(Ms(r.ember, "forward"), r.forward_bytes));
  put(&v, kTorch, gbs(Ms(r.torch, "forward"), r.forward_bytes));
  put(&v, kGather, gbs(Ms(r.ember, "gather"), r.gather_bytes));
  add("forward_gbs", "GB/s", "  effective bandwidth", std::exchange(v, {}));
  put(&v, kEmber, q.forward_vs_torch);
  add("forward_vs_torch", "x", "  Ember / PyTorch (speedup)", std::exchange(v, {}));
  put(&v, kEmber, q.forward_vs_gather_pct);
  add("forward_vs_gather", "%", "  Ember / gather bandwidth", std::exchange(v, {}));
  put(&v, kEmber, Ms(r.ember, "forward_validate"));
  add("forward_validate_ms", "ms", "  Ember with validate=true", std::exchange(v, {}));
  put(&v, kTorch, Ms(r.torch, "forward_autograd"));
  add("forward_autograd_ms", "ms", "  PyTorch with autograd on", std::exchange(v, {}));

  const std::pair<const char*, const char*> cases[] = {{"sgd", "backward+SGD"},
                                                       {"adagrad", "backward+row-wise Adagrad"}};
  for (const auto& [name, label] : cases) {
    const std::string n = name;
    const double bytes = n == "sgd" ? r.sgd_bytes : r.adagrad_bytes;
    auto best = BestTorch(r, n);
    std::optional<double> torch_ms;
    if (best) torch_ms = best->first;
    put(&v, kEmber, Ms(r.ember, n));
    put(&v, kTorch, torch_ms);
    add(n + "_ms", "ms", label, std::exchange(v, {}));
    put(&v, kEmber, gbs(Ms(r.ember, n), bytes));
    put(&v, kTorch, gbs(torch_ms, bytes));
    add(n + "_gbs", "GB/s", "  effective bandwidth", std::exchange(v, {}));
    put(&v, kEmber, n == "sgd" ? q.sgd_vs_torch : q.adagrad_vs_torch);
    add(n + "_vs_torch", "x", "  Ember / PyTorch's faster (speedup)", std::exchange(v, {}));
    put(&v, kEmber, Ms(r.ember, n + "_det"));
    add(n + "_det_ms", "ms", "  Ember deterministic", std::exchange(v, {}));
    put(&v, kTorch, Ms(r.torch, n + "_sparse"));
    add(n + "_sparse_ms", "ms", "  PyTorch sparse grad", std::exchange(v, {}));
    put(&v, kTorch, Ms(r.torch, n + "_dense"));
    add(n + "_dense_ms", "ms", "  PyTorch dense grad", std::exchange(v, {}));
  }
  if (r.gather_unroll > 0) {
    table.notes.push_back(absl::StrFormat(
        "gather: %d rows in flight per warp; Ember forward spot check: %s", r.gather_unroll,
        r.forward_checked ? "sampled bags match host sums" : "NOT PASSED"));
  }
  for (const auto& [key, why] : r.errors) table.notes.push_back(absl::StrCat(key, ": ", why));
  return table;
}

struct Worst {
  std::optional<double> value;
  std::string shape;
  int measured = 0;
  int passing = 0;
};

}  // namespace

void BuildOpsTables(const OpsBenchOptions& options, OpsCasesResult* result) {
  struct Check {
    const char* key;
    const char* unit;
    const char* what;    // the row is "<what>, worst shape"
    const char* target;  // null: not a target
    double goal;
    std::optional<double> ShapeRatios::*ratio;
    Worst worst;
  };
  Check checks[] = {
      {"forward_vs_torch",
       "x",
       "forward / PyTorch",
       "TBE forward vs nn.EmbeddingBag",
       1.5,
       &ShapeRatios::forward_vs_torch,
       {}},
      {"forward_vs_gather",
       "%",
       "forward % of gather",
       "TBE forward, % of random-row gather",
       60,
       &ShapeRatios::forward_vs_gather_pct,
       {}},
      {"forward_validate_kept",
       "%",
       "forward validated, % of unvalidated",
       "TBE forward with validation, % of its throughput without",
       95,
       &ShapeRatios::validate_kept_pct,
       {}},
      {"sgd_vs_torch",
       "x",
       "bwd+SGD / PyTorch",
       "TBE backward+SGD vs PyTorch",
       1.5,
       &ShapeRatios::sgd_vs_torch,
       {}},
      {"adagrad_vs_torch",
       "x",
       "bwd+Adagrad / PyTorch",
       "TBE backward+row-wise Adagrad vs PyTorch",
       1.5,
       &ShapeRatios::adagrad_vs_torch,
       {}},
      {"sgd_det_vs_torch",
       "x",
       "bwd+SGD det. / PyTorch",
       nullptr,
       1.5,
       &ShapeRatios::sgd_det_vs_torch,
       {}},
      {"adagrad_det_vs_torch",
       "x",
       "bwd+Adagrad det. / PyTorch",
       nullptr,
       1.5,
       &ShapeRatios::adagrad_det_vs_torch,
       {}},
  };
  std::vector<std::string> errors;
  for (const ShapeResult& r : result->shapes) {
    if (!r.skipped.empty()) {
      errors.push_back(absl::StrCat(ShapeName(r.shape), " skipped: ", r.skipped));
      continue;
    }
    result->tables.push_back(ShapeTable(r));
    const ShapeRatios q = Ratios(r);
    for (Check& check : checks) {
      const std::optional<double>& value = q.*check.ratio;
      if (!value) continue;
      ++check.worst.measured;
      if (*value >= check.goal) ++check.worst.passing;
      if (!check.worst.value || *value < *check.worst.value) {
        check.worst.value = value;
        check.worst.shape = ShapeName(r.shape);
      }
    }
  }

  Table summary;
  summary.title = "TBE targets: each shape checked, the worst one shown";
  summary.target_column = kEmber;
  summary.columns = {kEmber};
  for (const Check& check : checks) {
    Table::Row row{check.key, check.unit, absl::StrCat(check.what, ", worst shape"), {}};
    if (check.worst.value) row.values[kEmber] = *check.worst.value;
    summary.rows.push_back(std::move(row));
    if (check.target != nullptr) {
      summary.targets.push_back({check.target, check.key, check.goal, true});
    }
    if (check.worst.measured > 0) {
      summary.notes.push_back(absl::StrFormat("%s: worst at %s; %d of %d shapes at least %g%s",
                                              check.what, check.worst.shape, check.worst.passing,
                                              check.worst.measured, check.goal, check.unit));
    }
  }
  const auto& o = options;
  summary.notes.push_back(absl::StrCat("device: ", result->device));
  summary.notes.push_back(result->torch_info);
  summary.notes.push_back(absl::StrFormat(
      "rows %d per table, D=%d f32, sum pooling, %s indices, Zipf alpha %g (seed %d); engine %s; "
      "Ember ops with validate=false unless said",
      o.rows, o.dim, o.index64 ? "i64" : "i32", o.zipf, o.seed, o.engine));
  summary.notes.push_back(absl::StrFormat(
      "per case: %d warm-up iterations, then %d runs of about %g ms (%d to %d iterations); "
      "median run",
      o.warmup, o.repeat, o.time_ms, o.min_iters, o.max_iters));
  summary.notes.push_back(
      "GB/s: gather N*D*4; forward N*D*4 + B*T*D*4 + index bytes; backward N*D*4 + 2*U*D*4 "
      "(+ 2*U*4 Adagrad) + index bytes (N lookups, U distinct rows; same bytes for PyTorch)");
  summary.notes.push_back(
      "PyTorch: one nn.EmbeddingBag of all T*rows rows (table t's indices shifted by t*rows), "
      "forward under no_grad; backward (retain_graph, no forward) + step + zero_grad, the faster "
      "of sparse and dense grads; Adagrad is element-wise");
  for (std::string& error : errors) summary.notes.push_back(std::move(error));
  result->tables.push_back(std::move(summary));
}

}  // namespace ember::bench
