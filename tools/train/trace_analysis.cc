#include "tools/train/trace_analysis.h"

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "engine/error.h"

namespace ember::train {
namespace {

constexpr char kStepEnd[] = "Trainer::StepEnd";

bool IsStreamRow(const std::string& name) {
  return name.rfind("gpu", 0) == 0 && name.find(" stream ") != std::string::npos;
}

struct Interval {
  double begin = 0.0;
  double end = 0.0;
  [[nodiscard]] bool valid() const { return end >= begin; }
};

double Overlap(const Interval& a, const Interval& b) {
  if (!a.valid() || !b.valid()) return 0.0;
  return std::max(0.0, std::min(a.end, b.end) - std::max(a.begin, b.begin));
}

// The length of the union of `spans`.
double UnionLength(std::vector<Interval> spans) {
  std::sort(spans.begin(), spans.end(),
            [](const Interval& x, const Interval& y) { return x.begin < y.begin; });
  double length = 0.0;
  double covered_to = -1e300;
  for (const Interval& iv : spans) {
    if (iv.end <= covered_to) continue;
    length += iv.end - std::max(iv.begin, covered_to);
    covered_to = iv.end;
  }
  return length;
}

// The spans of one op name on the chosen rows, in start order.
using ByName = std::map<std::string, std::vector<Interval>>;

const std::vector<Interval>& Spans(const ByName& by_name, const std::string& name) {
  static const std::vector<Interval>* none = new std::vector<Interval>();
  const auto it = by_name.find(name);
  return it == by_name.end() ? *none : it->second;
}

// Step i's stage: the k-th span of `name` (or the window from the a-th span
// of `first` to the b-th of `last`); invalid when absent.
Interval Nth(const std::vector<Interval>& spans, std::size_t k) {
  return k < spans.size() ? spans[k] : Interval{0.0, -1.0};
}
Interval Window(const std::vector<Interval>& first, std::size_t a,
                const std::vector<Interval>& last, std::size_t b) {
  if (a >= first.size() || b >= last.size()) return {0.0, -1.0};
  return {first[a].begin, last[b].end};
}

}  // namespace

ChromeTrace ReadChromeTrace(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InvalidArgument(fmt::format("[ReadChromeTrace] {}: cannot open", path));
  std::stringstream text;
  text << in.rdbuf();
  Json doc;
  try {
    doc = Json::Parse(text.str());
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(fmt::format("[ReadChromeTrace] {}: {}", path, e.what()));
  }
  ChromeTrace trace;
  for (const Json& event : doc["traceEvents"].array()) {
    const std::string& ph = event["ph"].string();
    const auto row = static_cast<uint64_t>(event["tid"].number());
    if (ph == "M" && event["name"].string() == "thread_name") {
      trace.rows.emplace_back(row, event["args"]["name"].string());
    } else if (ph == "X") {
      const double begin = event["ts"].number();
      trace.spans.push_back({event["name"].string(), row, begin, begin + event["dur"].number()});
    }
  }
  return trace;
}

TraceAnalysis AnalyzeTrace(const ChromeTrace& trace, int64_t skip_steps) {
  TraceAnalysis a;
  std::map<uint64_t, std::string> row_names(trace.rows.begin(), trace.rows.end());
  for (const auto& [id, name] : trace.rows) a.device_rows = a.device_rows || IsStreamRow(name);
  auto chosen = [&](uint64_t row) {
    const auto it = row_names.find(row);
    const bool stream = it != row_names.end() && IsStreamRow(it->second);
    return stream == a.device_rows;
  };

  // The window: from the prefetch of the first analyzed step to the last
  // step's end marker (the markers run on a CPU thread even in a GPU run).
  ByName all_by_name;
  std::vector<double> step_ends;
  for (const TraceSpan& s : trace.spans) {
    if (s.name == kStepEnd) step_ends.push_back(s.end_us);
    if (chosen(s.row)) all_by_name[s.name].push_back({s.begin_us, s.end_us});
  }
  for (auto& [name, spans] : all_by_name) {
    std::sort(spans.begin(), spans.end(),
              [](const Interval& x, const Interval& y) { return x.begin < y.begin; });
  }
  std::sort(step_ends.begin(), step_ends.end());
  const auto skip = static_cast<std::size_t>(std::max<int64_t>(0, skip_steps));
  const std::vector<Interval>& prefetches = Spans(all_by_name, "CachedTbe::Prefetch");
  Interval window{1e300, -1e300};
  if (skip < prefetches.size()) window.begin = prefetches[skip].begin;
  if (!step_ends.empty()) window.end = step_ends.back();
  if (window.begin > window.end) {  // no steps: the whole trace
    for (const TraceSpan& s : trace.spans) {
      window.begin = std::min(window.begin, s.begin_us);
      window.end = std::max(window.end, s.end_us);
    }
  }
  const std::size_t markers = step_ends.empty() ? prefetches.size() : step_ends.size();
  a.steps = static_cast<int64_t>(markers - std::min(skip, markers));
  // Each stage's spans from the first analyzed step on (the k-th span of a
  // name is step k's).
  ByName by_name;
  for (const auto& [name, spans] : all_by_name) {
    const std::size_t per_step =
        name == "ConcatColumns" || name == "SplitColumns" ? 2 : 1;  // their count per step
    if (name == "SgdUpdate" || name == "AdagradUpdate" || name == "AdamUpdate") {
      by_name[name] = spans;  // grouped per step below, after the skip
      continue;
    }
    const std::size_t first = std::min(spans.size(), skip * per_step);
    by_name[name].assign(spans.begin() + static_cast<std::ptrdiff_t>(first), spans.end());
  }
  a.window_us = std::max(0.0, window.end - window.begin);

  // Busy time per row: the union of its spans inside the window.
  std::map<uint64_t, std::vector<std::pair<Interval, const std::string*>>> per_row;
  std::vector<Interval> every_row;
  for (const TraceSpan& s : trace.spans) {
    if (!chosen(s.row)) continue;
    const Interval clipped{std::max(s.begin_us, window.begin), std::min(s.end_us, window.end)};
    if (clipped.end <= clipped.begin) continue;
    per_row[s.row].push_back({clipped, &s.name});
    every_row.push_back(clipped);
  }
  for (auto& [row, spans] : per_row) {
    RowBusy busy;
    busy.row = row_names.count(row) ? row_names[row] : fmt::format("thread {}", row);
    busy.spans = static_cast<int64_t>(spans.size());
    std::map<std::string, double> per_op;
    std::vector<Interval> intervals;
    double total = 0.0;
    for (const auto& [iv, name] : spans) {
      per_op[*name] += iv.end - iv.begin;
      total += iv.end - iv.begin;
      intervals.push_back(iv);
    }
    busy.busy_us = UnionLength(std::move(intervals));
    std::vector<std::pair<double, std::string>> ops;
    ops.reserve(per_op.size());
    for (const auto& [name, t] : per_op) ops.emplace_back(t, name);
    std::sort(ops.rbegin(), ops.rend());
    for (std::size_t i = 0; i < ops.size() && i < 3; ++i) {
      busy.top_ops += fmt::format("{}{} {:.0f}%", i > 0 ? ", " : "", ops[i].second,
                                  total > 0 ? 100.0 * ops[i].first / total : 0.0);
    }
    a.rows.push_back(std::move(busy));
  }
  std::sort(a.rows.begin(), a.rows.end(),
            [](const RowBusy& x, const RowBusy& y) { return x.busy_us > y.busy_us; });
  if (!a.rows.empty() && a.steps > 0) {
    a.bound_us_per_step = a.rows[0].busy_us / static_cast<double>(a.steps);
    a.bound_row = a.rows[0].row;
  }
  if (a.steps > 0) a.busy_us_per_step = UnionLength(every_row) / static_cast<double>(a.steps);

  // Stages of consecutive steps that ran at the same time.
  const auto& prefetch = Spans(by_name, "CachedTbe::Prefetch");
  // The cache's forward and backward run as ops' TBE ops on the cached
  // rows (named EmbeddingBag*), or as ops of their own (CachedTbe::*).
  std::vector<Interval> emb_forward = Spans(by_name, "CachedTbe::Forward");
  for (const Interval& i : Spans(by_name, "EmbeddingBagForward")) emb_forward.push_back(i);
  std::sort(emb_forward.begin(), emb_forward.end(),
            [](const Interval& x, const Interval& y) { return x.begin < y.begin; });
  const auto& concat = Spans(by_name, "ConcatColumns");
  const auto& split = Spans(by_name, "SplitColumns");
  const auto& loss = Spans(by_name, "SigmoidBinaryCrossEntropy");
  std::vector<Interval> emb_backward;
  std::vector<Interval> optimizer;
  for (const auto& [name, spans] : by_name) {
    if (name.rfind("CachedTbe::Backward", 0) == 0 || name.rfind("EmbeddingBagBackward", 0) == 0) {
      emb_backward.insert(emb_backward.end(), spans.begin(), spans.end());
    }
    if (name == "SgdUpdate" || name == "AdagradUpdate" || name == "AdamUpdate") {
      optimizer.insert(optimizer.end(), spans.begin(), spans.end());
    }
  }
  std::sort(optimizer.begin(), optimizer.end(),
            [](const Interval& x, const Interval& y) { return x.begin < y.begin; });
  std::sort(emb_backward.begin(), emb_backward.end(),
            [](const Interval& x, const Interval& y) { return x.begin < y.begin; });
  const std::size_t n = loss.size();
  const std::size_t all_steps =
      n + std::min(skip, Spans(all_by_name, "SigmoidBinaryCrossEntropy").size());
  const std::size_t per_update = all_steps > 0 ? optimizer.size() / all_steps : 0;
  optimizer.erase(optimizer.begin(), optimizer.begin() + static_cast<std::ptrdiff_t>(std::min(
                                                             optimizer.size(), skip * per_update)));
  auto dense_forward = [&](std::size_t i) { return Window(concat, 2 * i, loss, i); };
  auto dense_backward = [&](std::size_t i) { return Window(split, 2 * i, split, 2 * i + 1); };
  auto update = [&](std::size_t i) {
    if (per_update == 0 || (i + 1) * per_update > optimizer.size()) return Interval{0.0, -1.0};
    Interval w{optimizer[i * per_update].begin, optimizer[i * per_update].end};
    for (std::size_t k = i * per_update; k < (i + 1) * per_update; ++k) {
      w.end = std::max(w.end, optimizer[k].end);
    }
    return w;
  };
  struct Pair {
    const char* what;
    std::function<double(std::size_t)> overlap;  // of step i's pair; < 0: absent
  };
  auto both = [](const Interval& x, const Interval& y) {
    return x.valid() && y.valid() ? Overlap(x, y) : -1.0;
  };
  const std::vector<Pair> pairs = {
      {"prefetch(i+1) | embedding forward(i)",
       [&](std::size_t i) { return both(Nth(prefetch, i + 1), Nth(emb_forward, i)); }},
      {"prefetch(i+1) | dense forward(i)",
       [&](std::size_t i) { return both(Nth(prefetch, i + 1), dense_forward(i)); }},
      {"prefetch(i+1) | dense backward(i)",
       [&](std::size_t i) { return both(Nth(prefetch, i + 1), dense_backward(i)); }},
      {"embedding forward(i+1) | dense backward(i)",
       [&](std::size_t i) { return both(Nth(emb_forward, i + 1), dense_backward(i)); }},
      {"lookup(i+1) | dense update(i)",
       [&](std::size_t i) {
         const double p = both(Nth(prefetch, i + 1), update(i));
         const double f = both(Nth(emb_forward, i + 1), update(i));
         return p < 0 || f < 0 ? -1.0 : p + f;
       }},
      {"embedding backward(i) | dense update(i)",
       [&](std::size_t i) { return both(Nth(emb_backward, i), update(i)); }},
      // The cache's chain (cached_tbe.h): Prefetch(i+2) reads the home rows
      // Backward(i) writes, so it follows it; this row shows whether it did.
      {"prefetch(i+2) | embedding backward(i)",
       [&](std::size_t i) { return both(Nth(prefetch, i + 2), Nth(emb_backward, i)); }},
  };
  for (const Pair& p : pairs) {
    StageOverlap o;
    o.what = p.what;
    for (std::size_t i = 0; i + 1 < std::max<std::size_t>(n, 1); ++i) {
      const double us = p.overlap(i);
      if (us < 0) continue;
      ++o.pairs;
      if (us > 0) ++o.overlapped;
      o.overlap_us += us;
    }
    a.overlaps.push_back(o);
  }
  return a;
}

Json ToJson(const TraceAnalysis& a) {
  Json rows = Json::MakeArray();
  for (const RowBusy& r : a.rows) {
    rows.Push(Json::MakeObject()
                  .Set("row", r.row)
                  .Set("busy_us", r.busy_us)
                  .Set("spans", r.spans)
                  .Set("top_ops", r.top_ops));
  }
  Json overlaps = Json::MakeArray();
  for (const StageOverlap& o : a.overlaps) {
    overlaps.Push(Json::MakeObject()
                      .Set("stages", o.what)
                      .Set("step_pairs", o.pairs)
                      .Set("overlapped", o.overlapped)
                      .Set("overlap_us", o.overlap_us));
  }
  return Json::MakeObject()
      .Set("steps", a.steps)
      .Set("window_us", a.window_us)
      .Set("device_rows", a.device_rows)
      .Set("bound_us_per_step", a.bound_us_per_step)
      .Set("bound_row", a.bound_row)
      .Set("busy_us_per_step", a.busy_us_per_step)
      .Set("rows", std::move(rows))
      .Set("overlaps", std::move(overlaps));
}

}  // namespace ember::train
