#include "tools/train/dist/rendezvous.h"

#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "engine/error.h"

namespace ember::train {
namespace {

constexpr char kHeader[] = "ember-rendezvous-v1";

std::string Variable(const char* name, bool required) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') {
    if (!required) return "";
    throw InvalidArgument(fmt::format(
        "[ProcessGroupFromEnv] {} is not set; tools/train/launch.sh sets it for each host", name));
  }
  return value;
}

int64_t Number(const char* name, const std::string& text) {
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) {
    throw InvalidArgument(
        fmt::format("[ProcessGroupFromEnv] {}='{}' is not a whole number", name, text));
  }
  return value;
}

// What node 0 publishes, one line.
std::string Contents(const ProcessGroupEnv& env, int gpus_per_node, const NcclUniqueId& id) {
  return fmt::format("{} run={} nodes={} gpus_per_node={} nccl_id={}\n", kHeader, env.run_id,
                     env.num_nodes, gpus_per_node, id.ToHex());
}

// The id in `text` when it is this run's file; nullopt for another run's
// (or a file being replaced). Throws for this run's file of another shape.
std::optional<NcclUniqueId> Parse(const ProcessGroupEnv& env, int gpus_per_node,
                                  const std::string& text) {
  std::istringstream in(text);
  std::string header, run, nodes, gpus, id;
  in >> header >> run >> nodes >> gpus >> id;
  if (header != kHeader || run != "run=" + env.run_id) return std::nullopt;
  const std::string expected_nodes = fmt::format("nodes={}", env.num_nodes);
  const std::string expected_gpus = fmt::format("gpus_per_node={}", gpus_per_node);
  if (nodes != expected_nodes || gpus != expected_gpus) {
    throw InvalidArgument(
        fmt::format("[Rendezvous] {}: run '{}' was published with {} {}; node {} has {} {}",
                    env.rendezvous_path, env.run_id, nodes, gpus, env.node_rank, expected_nodes,
                    expected_gpus));
  }
  if (!id.starts_with("nccl_id=")) return std::nullopt;
  return NcclUniqueId::FromHex(id.substr(8));
}

void Publish(const ProcessGroupEnv& env, const std::string& contents) {
  const std::filesystem::path path(env.rendezvous_path);
  const std::filesystem::path tmp = path.string() + ".tmp." + env.run_id;
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << contents;
    out.flush();
    if (!out) {
      throw Unavailable(
          fmt::format("[Rendezvous] cannot write {} (run '{}')", tmp.string(), env.run_id));
    }
  }
  std::error_code error;
  std::filesystem::rename(tmp, path, error);
  if (error) {
    throw Unavailable(fmt::format("[Rendezvous] cannot rename {} to {}: {}", tmp.string(),
                                  path.string(), error.message()));
  }
}

}  // namespace

ProcessGroupEnv ProcessGroupFromEnv() {
  ProcessGroupEnv env;
  const int64_t nodes = Number("EMBER_NUM_NODES", Variable("EMBER_NUM_NODES", true));
  const int64_t rank = Number("EMBER_NODE_RANK", Variable("EMBER_NODE_RANK", true));
  if (nodes < 1 || nodes > 65536 || rank < 0 || rank >= nodes) {
    throw InvalidArgument(fmt::format(
        "[ProcessGroupFromEnv] EMBER_NODE_RANK={} of EMBER_NUM_NODES={}: expected 0 <= rank < "
        "nodes",
        rank, nodes));
  }
  env.num_nodes = static_cast<int>(nodes);
  env.node_rank = static_cast<int>(rank);
  env.rendezvous_path = Variable("EMBER_RENDEZVOUS", true);
  env.run_id = Variable("EMBER_RUN_ID", true);
  if (env.run_id.find_first_of(" \t\n/") != std::string::npos) {
    throw InvalidArgument(
        fmt::format("[ProcessGroupFromEnv] EMBER_RUN_ID='{}' has a space or a slash", env.run_id));
  }
  const std::string timeout = Variable("EMBER_RENDEZVOUS_TIMEOUT_S", false);
  if (!timeout.empty()) {
    const int64_t seconds = Number("EMBER_RENDEZVOUS_TIMEOUT_S", timeout);
    if (seconds < 1) {
      throw InvalidArgument(fmt::format(
          "[ProcessGroupFromEnv] EMBER_RENDEZVOUS_TIMEOUT_S={} is not a positive number", seconds));
    }
    env.timeout = std::chrono::seconds(seconds);
  }
  return env;
}

NcclUniqueId Rendezvous(const ProcessGroupEnv& env, int gpus_per_node,
                        const std::function<NcclUniqueId()>& make_id) {
  if (env.node_rank == 0) {
    const NcclUniqueId id = make_id();
    Publish(env, Contents(env, gpus_per_node, id));
    return id;
  }
  const auto deadline = std::chrono::steady_clock::now() + env.timeout;
  for (;;) {
    std::ifstream in(env.rendezvous_path);
    if (in) {
      std::stringstream text;
      text << in.rdbuf();
      if (std::optional<NcclUniqueId> id = Parse(env, gpus_per_node, text.str())) return *id;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      throw Unavailable(fmt::format(
          "[Rendezvous] node {}: no rendezvous of run '{}' in {} after {} ms (is node 0 "
          "running, with the same EMBER_RUN_ID and a path both hosts share?)",
          env.node_rank, env.run_id, env.rendezvous_path, env.timeout.count()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace ember::train
