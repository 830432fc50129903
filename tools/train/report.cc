#include "tools/train/report.h"

#include <cmath>

#include <fmt/format.h>

#include "engine/base/device.h"
#include "storage/storage.h"

namespace ember::train {
namespace {

std::string Count(double n) {
  if (n >= 1e9) return fmt::format("{:.2f}G", n / 1e9);
  if (n >= 1e6) return fmt::format("{:.2f}M", n / 1e6);
  if (n >= 1e4) return fmt::format("{:.1f}k", n / 1e3);
  return fmt::format("{:.0f}", n);
}

std::string Bytes(double b) {
  if (b >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024));
  if (b >= 1024.0 * 1024) return fmt::format("{:.1f} MiB", b / (1024.0 * 1024));
  if (b >= 1024.0) return fmt::format("{:.1f} KiB", b / 1024.0);
  return fmt::format("{:.0f} B", b);
}

std::string Auc(double auc) { return std::isnan(auc) ? "n/a" : fmt::format("{:.4f}", auc); }

MemoryUse Use(std::string where, const storage::MemoryStats& s) {
  return {std::move(where), static_cast<int64_t>(s.allocated), static_cast<int64_t>(s.reserved),
          static_cast<int64_t>(s.peak_allocated), static_cast<int64_t>(s.peak_reserved)};
}

Json CountsJson(const cache::CacheCounts& c) {
  return Json::MakeObject()
      .Set("requested", c.requested)
      .Set("unique", c.unique)
      .Set("unique_misses", c.unique_misses)
      .Set("inserted", c.inserted)
      .Set("evicted", c.evicted)
      .Set("conflict_misses", c.unique_conflict_misses)
      .Set("bytes_to_cache", c.bytes_to_cache)
      .Set("bytes_to_home", c.bytes_to_home)
      .Set("hit_rate", c.hit_rate());
}

// The share of the traced steps in which any row was busy.
double BusyShare(const TraceAnalysis& t) {
  const double step_us = t.steps > 0 ? t.window_us / static_cast<double>(t.steps) : 0.0;
  return step_us > 0 ? t.busy_us_per_step / step_us : 0.0;
}

}  // namespace

std::vector<MemoryUse> MemoryUsage(engine::Context ctx) {
  std::vector<MemoryUse> uses;
  uses.push_back(Use("host", storage::GetStorage(storage::MemoryKind::kCpu).Stats()));
  if (GpuCount() > 0) {
    uses.push_back(Use("host pinned", storage::GetStorage(storage::MemoryKind::kPinned).Stats()));
  }
  if (ctx.is_gpu()) {
    uses.push_back(Use(fmt::format("{} device", ctx.ToString()),
                       storage::GetStorage(storage::MemoryKind::kDevice, ctx.device_id).Stats()));
  }
  return uses;
}

void ResetMemoryPeaks(engine::Context ctx) {
  storage::GetStorage(storage::MemoryKind::kCpu).ResetPeaks();
  if (GpuCount() > 0) storage::GetStorage(storage::MemoryKind::kPinned).ResetPeaks();
  if (ctx.is_gpu()) storage::GetStorage(storage::MemoryKind::kDevice, ctx.device_id).ResetPeaks();
}

std::string FormatProgress(const Progress& p) {
  const std::string of = p.total_steps > 0 ? fmt::format("/{}", p.total_steps) : "";
  const std::string hit =
      p.cache_hit_rate ? fmt::format("{:.1f}%", 100.0 * *p.cache_hit_rate) : "- (no prefetch)";
  return fmt::format("step {}{}  loss {:.4f}  {} ex/s  cache hit {}", p.step, of, p.loss,
                     Count(p.examples_per_second), hit);
}

std::string FormatEval(const EvalResult& r) {
  return fmt::format("eval after step {}: loss {:.4f}  AUC {}  ({} examples)", r.step, r.loss,
                     Auc(r.auc), r.examples);
}

std::string FormatSummary(const RunReport& r) {
  const StepSummary& s = r.steps;
  const TrainResult& t = r.result;
  std::string out = "== ember-train summary ==\n";
  out += fmt::format("run        {} schedule, {} on {}\n", r.schedule, r.engine, r.device);
  out += fmt::format("model      {}\n", r.model);
  out += fmt::format("steps      {} (steps {} to {}{}), {} examples, batch {}\n", t.steps,
                     t.first_step, t.first_step + t.steps, t.stopped ? ", stopped early" : "",
                     t.examples, r.batch_size);
  out += fmt::format("step time  P50 {:.2f} ms  P90 {:.2f} ms  ({} ex/s; the last {} steps)\n",
                     s.p50_ms, s.p90_ms, Count(s.examples_per_second), s.timed_steps);
  out += fmt::format("loss       first {:.4f}  final {:.4f}  (mean of the last 10%: {:.4f})\n",
                     s.first_loss, s.final_loss, s.tail_loss);
  if (!t.evals.empty()) {
    const EvalResult& e = t.evals.back();
    out += fmt::format("held-out   loss {:.4f}  AUC {}  ({} examples, after step {})\n", e.loss,
                       Auc(e.auc), e.examples, e.step);
  } else {
    out += "held-out   none evaluated\n";
  }
  const cache::CacheCounts& c = t.cache.all;
  out += fmt::format(
      "cache      hit rate {:.2f}% of {} distinct rows; {} inserted, {} evicted, {} conflict "
      "misses; {} in, {} back; {} slots\n",
      100.0 * c.hit_rate(), Count(static_cast<double>(c.unique)),
      Count(static_cast<double>(c.inserted)), Count(static_cast<double>(c.evicted)),
      Count(static_cast<double>(c.unique_conflict_misses)),
      Bytes(static_cast<double>(c.bytes_to_cache)), Bytes(static_cast<double>(c.bytes_to_home)),
      r.cache_slots);
  if (t.cache.copy_engine_fills > 0) {
    out += fmt::format("           {} rows in by the copy engines\n",
                       Count(static_cast<double>(t.cache.copy_engine_fills)));
  }
  bool first = true;
  for (const MemoryUse& m : r.memory) {
    out += fmt::format(
        "{}{}: allocated {} (peak {}), reserved {} (peak {})\n",
        first ? "memory     " : "           ", m.where, Bytes(static_cast<double>(m.allocated)),
        Bytes(static_cast<double>(m.peak_allocated)), Bytes(static_cast<double>(m.reserved)),
        Bytes(static_cast<double>(m.peak_reserved)));
    first = false;
  }
  out +=
      fmt::format("{}tables at home (rows and optimizer state): {}\n",
                  first ? "memory     " : "           ", Bytes(static_cast<double>(r.home_bytes)));
  if (r.trace) {
    out += fmt::format("trace      {}: {} steps, bound {:.3f} ms/step by {}\n", r.trace_path,
                       r.trace->steps, r.trace->bound_us_per_step / 1e3, r.trace->bound_row);
  }
  return out;
}

std::string FormatComparison(const std::vector<RunReport>& runs) {
  if (runs.empty()) return "";
  const double reference = runs.front().steps.examples_per_second;
  std::string out = "== schedules compared (same data, same model) ==\n";
  out += fmt::format("{:<10} {:>9} {:>9} {:>10} {:>8} {:>10} {:>8} {:>7} {:>10} {:>8}  {}\n",
                     "schedule", "P50 ms", "P90 ms", "ex/s", "vs base", "bound ms", "P50/bnd",
                     "busy", "loss", "AUC", "bound row");
  for (const RunReport& r : runs) {
    const StepSummary& s = r.steps;
    const double ratio = reference > 0 ? s.examples_per_second / reference : 0.0;
    const double bound_ms = r.trace ? r.trace->bound_us_per_step / 1e3 : 0.0;
    const double busy = r.trace ? BusyShare(*r.trace) : 0.0;
    const double loss = r.result.evals.empty() ? s.tail_loss : r.result.evals.back().loss;
    const double auc = r.result.evals.empty() ? NAN : r.result.evals.back().auc;
    out += fmt::format(
        "{:<10} {:>9.3f} {:>9.3f} {:>10} {:>7.2f}x {:>10.3f} {:>8.2f} {:>6.1f}% {:>10.4f} {:>8}  "
        "{}\n",
        r.schedule, s.p50_ms, s.p90_ms, Count(s.examples_per_second), ratio, bound_ms,
        bound_ms > 0 ? s.p50_ms / bound_ms : 0.0, 100.0 * busy, loss, Auc(auc),
        r.trace ? r.trace->bound_row : "-");
  }
  out += fmt::format(
      "(step times and ex/s: each schedule's last {} steps; bound: the busy time of the busiest "
      "stream or worker per step, from each schedule's trace; busy: the share of the traced steps "
      "in which any of them was busy (on a GPU, the GPU: near 100% the step is bound by the "
      "GPU's whole work, not by one stream or the host); loss and AUC held-out where "
      "evaluated)\n",
      runs.front().steps.timed_steps);
  if (!runs.front().trace) return out;
  out += "overlapped stages (steps that overlapped / step pairs, total overlap):\n";
  out += fmt::format("{:<44}", "");
  for (const RunReport& r : runs) out += fmt::format(" {:>18}", r.schedule);
  out += "\n";
  for (std::size_t k = 0; k < runs.front().trace->overlaps.size(); ++k) {
    out += fmt::format("{:<44}", runs.front().trace->overlaps[k].what);
    for (const RunReport& r : runs) {
      if (!r.trace || k >= r.trace->overlaps.size()) {
        out += fmt::format(" {:>18}", "-");
        continue;
      }
      const StageOverlap& o = r.trace->overlaps[k];
      out += fmt::format(" {:>18}",
                         fmt::format("{}/{} {:.2f}ms", o.overlapped, o.pairs, o.overlap_us / 1e3));
    }
    out += "\n";
  }
  return out;
}

Json ToJson(const RunReport& r) {
  const StepSummary& s = r.steps;
  const TrainResult& t = r.result;
  Json evals = Json::MakeArray();
  for (const EvalResult& e : t.evals) {
    evals.Push(Json::MakeObject()
                   .Set("step", e.step)
                   .Set("examples", e.examples)
                   .Set("loss", e.loss)
                   .Set("auc", e.auc));
  }
  Json losses = Json::MakeArray();
  Json times = Json::MakeArray();
  for (const StepRecord& rec : t.records) {
    losses.Push(static_cast<double>(rec.loss));
    times.Push(rec.seconds * 1e3);
  }
  Json memory = Json::MakeArray();
  for (const MemoryUse& m : r.memory) {
    memory.Push(Json::MakeObject()
                    .Set("where", m.where)
                    .Set("allocated", m.allocated)
                    .Set("reserved", m.reserved)
                    .Set("peak_allocated", m.peak_allocated)
                    .Set("peak_reserved", m.peak_reserved));
  }
  Json tables = Json::MakeArray();
  for (const cache::CacheCounts& c : t.cache.tables) tables.Push(CountsJson(c));
  Json out = Json::MakeObject()
                 .Set("schedule", r.schedule)
                 .Set("engine", r.engine)
                 .Set("device", r.device)
                 .Set("model", r.model)
                 .Set("batch_size", r.batch_size)
                 .Set("first_step", t.first_step)
                 .Set("steps", t.steps)
                 .Set("examples", t.examples)
                 .Set("position", t.position)
                 .Set("stopped", t.stopped)
                 .Set("timed_steps", s.timed_steps)
                 .Set("p50_step_ms", s.p50_ms)
                 .Set("p90_step_ms", s.p90_ms)
                 .Set("examples_per_second", s.examples_per_second)
                 .Set("first_loss", static_cast<double>(s.first_loss))
                 .Set("final_loss", static_cast<double>(s.final_loss))
                 .Set("tail_loss", s.tail_loss)
                 .Set("evaluations", std::move(evals))
                 .Set("cache", Json::MakeObject()
                                   .Set("slots", r.cache_slots)
                                   .Set("all", CountsJson(t.cache.all))
                                   .Set("copy_engine_fills", t.cache.copy_engine_fills)
                                   .Set("tables", std::move(tables)))
                 .Set("memory", std::move(memory))
                 .Set("home_bytes", r.home_bytes)
                 .Set("step_losses", std::move(losses))
                 .Set("step_ms", std::move(times));
  if (r.trace) out.Set("trace", ToJson(*r.trace)).Set("trace_path", r.trace_path);
  return out;
}

}  // namespace ember::train
