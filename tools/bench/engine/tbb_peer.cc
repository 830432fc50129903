#include "tools/bench/engine/tbb_peer.h"

#include "engine/error.h"

// The peers are optional (EMBER_BUILD_BENCH_PEERS); without TBB this file
// compiles to stubs so that the cases carry no #if.
#ifdef EMBER_BENCH_WITH_TBB

#include <algorithm>
#include <chrono>
#include <deque>

#include <oneapi/tbb/flow_graph.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/version.h>

namespace ember::bench {
namespace {

namespace flow = oneapi::tbb::flow;
// lightweight: a node whose body is a few nanoseconds runs in the thread that
// made it ready instead of as a new task, the policy TBB offers for such
// bodies. It makes this peer faster (docs/benchmarks.md says by how much),
// so the peer gets its best showing.
using OpNode = flow::continue_node<flow::continue_msg, flow::lightweight>;

// Who touched a var last: the op that wrote it and the ops that read it
// since. An op that writes the var must follow all of them; an op that reads
// it only the writer.
struct VarHistory {
  int last_writer = -1;
  std::vector<int> readers;
};

// The ops that op `op` must follow, without duplicates. continue_node counts
// one predecessor per edge, so a duplicate edge would be harmless but slow.
void CollectPredecessors(const engine::testing::WorkloadOp& op,
                         const std::vector<VarHistory>& history, std::vector<int>* preds) {
  preds->clear();
  for (int var : op.reads) {
    if (history[var].last_writer >= 0) preds->push_back(history[var].last_writer);
  }
  const VarHistory& written = history[op.write];
  if (written.last_writer >= 0) preds->push_back(written.last_writer);
  preds->insert(preds->end(), written.readers.begin(), written.readers.end());
  std::sort(preds->begin(), preds->end());
  preds->erase(std::unique(preds->begin(), preds->end()), preds->end());
}

// Records op `id` in the histories. The reads go first so that an op that
// reads and writes one var ends up as its writer only.
void RecordAccesses(const engine::testing::WorkloadOp& op, int id,
                    std::vector<VarHistory>* history) {
  for (int var : op.reads) {
    std::vector<int>& readers = (*history)[var].readers;
    if (readers.empty() || readers.back() != id) readers.push_back(id);
  }
  VarHistory& written = (*history)[op.write];
  written.last_writer = id;
  written.readers.clear();
}

}  // namespace

bool TbbPeerBuilt() { return true; }

std::string TbbPeerDescription() {
  return std::string("oneTBB ") + TBB_VERSION_STRING + " flow graph";
}

double RunOnTbbFlowGraph(const engine::testing::Workload& workload, int threads,
                         std::vector<uint64_t>* data) {
  oneapi::tbb::global_control limit(oneapi::tbb::global_control::max_allowed_parallelism, threads);
  std::vector<VarHistory> history(workload.num_vars);
  std::vector<int> preds;
  std::vector<int> sources;
  const auto start = std::chrono::steady_clock::now();
  flow::graph graph;
  // A deque never moves its elements, and graph nodes cannot be moved.
  std::deque<OpNode> nodes;
  for (int id = 0; id < static_cast<int>(workload.ops.size()); ++id) {
    const engine::testing::WorkloadOp& op = workload.ops[id];
    nodes.emplace_back(graph, [&op, data](const flow::continue_msg&) {
      (*data)[op.write] = engine::testing::ApplyOp(op, *data);
      return flow::continue_msg();
    });
    CollectPredecessors(op, history, &preds);
    for (int pred : preds) flow::make_edge(nodes[pred], nodes.back());
    if (preds.empty()) sources.push_back(id);
    RecordAccesses(op, id, &history);
  }
  for (int id : sources) nodes[id].try_put(flow::continue_msg());
  graph.wait_for_all();
  const auto stop = std::chrono::steady_clock::now();
  return std::chrono::duration<double>(stop - start).count();
}

}  // namespace ember::bench

#else  // !EMBER_BENCH_WITH_TBB

namespace ember::bench {

bool TbbPeerBuilt() { return false; }

std::string TbbPeerDescription() { return "oneTBB flow graph (not built)"; }

double RunOnTbbFlowGraph(const engine::testing::Workload&, int, std::vector<uint64_t>*) {
  throw Unavailable("[RunOnTbbFlowGraph] ember-bench-engine was built without oneTBB");
}

}  // namespace ember::bench

#endif  // EMBER_BENCH_WITH_TBB
