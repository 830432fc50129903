// The PyTorch peer of ember-bench-ops, from the C++ side (ops_peer.h).

#include "tools/bench/ops/ops_peer.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

#ifndef EMBER_BENCH_TORCH_PEER
#define EMBER_BENCH_TORCH_PEER "tools/bench/ops/tbe_torch_peer.py"
#endif

namespace ember::bench::ops_bench {
namespace {

bool FileExists(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

// `text` in single quotes for sh.
std::string ShellQuote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted.push_back(c);
    }
  }
  return quoted + "'";
}

bool WriteFile(const std::string& path, const void* data, std::size_t bytes) {
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) return false;
  const bool ok = std::fwrite(data, 1, bytes, file) == bytes;
  return std::fclose(file) == 0 && ok;
}

// One flat JSON object per line: string, number, true/false/null values.
// Strings keep their escapes but for \" and \\; the peer writes nothing
// else.
std::map<std::string, std::string> ParseFlatJson(std::string_view line) {
  std::map<std::string, std::string> fields;
  std::size_t i = line.find('{');
  if (i == std::string_view::npos) return fields;
  auto skip_space = [&] {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
  };
  auto read_string = [&](std::string* out) {
    if (i >= line.size() || line[i] != '"') return false;
    for (++i; i < line.size() && line[i] != '"'; ++i) {
      if (line[i] == '\\' && i + 1 < line.size()) ++i;
      out->push_back(line[i]);
    }
    return i++ < line.size();
  };
  ++i;
  while (true) {
    skip_space();
    std::string key;
    std::string value;
    if (!read_string(&key)) break;
    skip_space();
    if (i >= line.size() || line[i++] != ':') break;
    skip_space();
    if (i < line.size() && line[i] == '"') {
      if (!read_string(&value)) break;
    } else {
      while (i < line.size() && line[i] != ',' && line[i] != '}') value.push_back(line[i++]);
      while (!value.empty() && value.back() == ' ') value.pop_back();
    }
    fields[key] = value;
    skip_space();
    if (i >= line.size() || line[i] != ',') break;
    ++i;
  }
  return fields;
}

}  // namespace

TorchPeer::TorchPeer(const OpsBenchOptions& options) : options_(options) {
  if (options.python.empty()) {
    status_ = "PyTorch peer off (--python is empty)";
    return;
  }
  // An explicit --torch_peer, else the source tree's, else the one under
  // the working directory.
  const std::vector<std::string> candidates =
      options.torch_peer.empty()
          ? std::vector<std::string>{EMBER_BENCH_TORCH_PEER, "tools/bench/ops/tbe_torch_peer.py"}
          : std::vector<std::string>{options.torch_peer};
  for (const std::string& candidate : candidates) {
    if (FileExists(candidate)) {
      script_ = candidate;
      break;
    }
  }
  if (script_.empty()) {
    status_ =
        absl::StrCat("PyTorch peer not run: script not found (--torch_peer=",
                     options.torch_peer.empty() ? EMBER_BENCH_TORCH_PEER : options.torch_peer, ")");
    return;
  }
  std::string base = options.tmp_dir;
  if (base.empty()) {
    const char* env = std::getenv("TMPDIR");
    base = env != nullptr && *env != '\0' ? env : "/tmp";
  }
  std::string pattern = absl::StrCat(base, "/ember-bench-ops-XXXXXX");
  if (::mkdtemp(pattern.data()) == nullptr) {
    status_ = absl::StrCat("PyTorch peer not run: cannot make a directory in ", base);
    return;
  }
  dir_ = pattern;
  enabled_ = true;
  status_ = absl::StrCat("PyTorch peer: ", script_, " (no info line)");
}

TorchPeer::~TorchPeer() {
  if (!dir_.empty()) ::rmdir(dir_.c_str());
}

PeerRun TorchPeer::Run(const OpsShape& shape, const void* indices) {
  PeerRun run;
  const std::size_t index_bytes = options_.index64 ? 8 : 4;
  const int64_t lookups = shape.tables * shape.batch * shape.pooling;
  const int64_t bags = shape.tables * shape.batch;
  const std::string indices_path = absl::StrCat(dir_, "/indices.bin");
  const std::string offsets_path = absl::StrCat(dir_, "/offsets.bin");
  const std::string spec_path = absl::StrCat(dir_, "/spec.json");

  std::vector<char> offsets((bags + 1) * index_bytes);
  for (int64_t j = 0; j <= bags; ++j) {
    if (options_.index64) {
      reinterpret_cast<int64_t*>(offsets.data())[j] = j * shape.pooling;
    } else {
      reinterpret_cast<int32_t*>(offsets.data())[j] = static_cast<int32_t>(j * shape.pooling);
    }
  }
  const std::string spec = absl::StrFormat(
      "{\"tables\": %d, \"pooling\": %d, \"batch\": %d, \"rows\": %d, \"dim\": %d, "
      "\"index_dtype\": \"%s\", \"indices\": \"%s\", \"offsets\": \"%s\", \"seed\": %d, "
      "\"time_ms\": %g, \"warmup\": %d, \"min_iters\": %d, \"max_iters\": %d, \"repeat\": %d, "
      "\"sgd_lr\": 0.01, \"adagrad_lr\": 0.01, \"adagrad_eps\": 1e-8}\n",
      shape.tables, shape.pooling, shape.batch, options_.rows, options_.dim,
      options_.index64 ? "int64" : "int32", indices_path, offsets_path, options_.seed,
      options_.time_ms, options_.warmup, options_.min_iters, options_.max_iters, options_.repeat);
  auto cleanup = [&] {
    std::remove(indices_path.c_str());
    std::remove(offsets_path.c_str());
    std::remove(spec_path.c_str());
  };
  if (!WriteFile(indices_path, indices, lookups * index_bytes) ||
      !WriteFile(offsets_path, offsets.data(), offsets.size()) ||
      !WriteFile(spec_path, spec.data(), spec.size())) {
    cleanup();
    run.errors["peer"] = absl::StrCat("cannot write the batch into ", dir_);
    return run;
  }

  const std::string command = absl::StrCat(ShellQuote(options_.python), " ", ShellQuote(script_),
                                           " --spec ", ShellQuote(spec_path));
  std::fflush(stdout);
  std::fflush(stderr);
  std::FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) {
    cleanup();
    enabled_ = false;
    status_ = absl::StrCat("PyTorch peer not run: popen failed for ", command);
    return run;
  }
  std::string unavailable;
  char buffer[4096];
  while (std::fgets(buffer, sizeof(buffer), pipe) != nullptr) {
    std::map<std::string, std::string> fields = ParseFlatJson(buffer);
    if (fields.contains("info")) {
      status_ = absl::StrCat("PyTorch peer: ", fields["info"]);
      continue;
    }
    const std::string name = fields.contains("case") ? fields["case"] : "peer";
    if (fields.contains("error")) {
      if (fields["unavailable"] == "true") unavailable = fields["error"];
      run.errors[name] = fields["error"];
      continue;
    }
    Timing timing;
    if (!fields.contains("case") || !absl::SimpleAtod(fields["ms"], &timing.ms)) continue;
    (void)absl::SimpleAtoi(fields["iters"], &timing.iters);
    for (absl::string_view text : absl::StrSplit(fields["runs"], ' ', absl::SkipEmpty())) {
      double value = 0;
      if (absl::SimpleAtod(text, &value)) timing.runs.push_back(value);
    }
    run.timings[name] = std::move(timing);
  }
  const int status = ::pclose(pipe);
  cleanup();
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (!unavailable.empty()) {
    enabled_ = false;
    status_ = absl::StrCat("PyTorch peer not run: ", unavailable);
  } else if (code == 127 || code == 126) {
    enabled_ = false;
    status_ = absl::StrCat("PyTorch peer not run: '", options_.python,
                           "' could not be run (exit status ", code, ")");
  } else if (code != 0 && !run.errors.contains("peer")) {
    run.errors["peer"] =
        absl::StrFormat("%s exited with status %d (its stderr is above)", script_, code);
  }
  return run;
}

}  // namespace ember::bench::ops_bench
