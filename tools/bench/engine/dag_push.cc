#include "tools/bench/engine/dag_push.h"

namespace ember::bench {

using engine::testing::WorkloadOp;

const char* PushPathName(PushPath path) {
  return path == PushPath::kAsync ? "PushAsync" : "PushSync";
}

std::vector<engine::VarHandle> NewVars(engine::Engine& engine, int count) {
  std::vector<engine::VarHandle> vars(count);
  for (engine::VarHandle& var : vars) var = engine.NewVariable();
  return vars;
}

void DeleteVars(engine::Engine& engine, const std::vector<engine::VarHandle>& vars) {
  for (engine::VarHandle var : vars) engine.DeleteVariable(var);
  engine.WaitForAll();
}

void PushDag(engine::Engine& engine, const engine::testing::Workload& workload,
             const std::vector<engine::VarHandle>& vars, PushPath path,
             std::vector<uint64_t>* data) {
  std::vector<engine::VarHandle> reads;
  for (const WorkloadOp& op : workload.ops) {
    reads.clear();
    for (int var : op.reads) reads.push_back(vars[var]);
    if (path == PushPath::kAsync) {
      engine.PushAsync(
          [&op, data](engine::RunContext, const engine::OnStart& on_start,
                      const engine::OnComplete& on_complete) {
            on_start();
            (*data)[op.write] = engine::testing::ApplyOp(op, *data);
            on_complete();
          },
          reads, {vars[op.write]});
    } else {
      engine.PushSync(
          [&op, data](engine::RunContext) {
            (*data)[op.write] = engine::testing::ApplyOp(op, *data);
          },
          reads, {vars[op.write]});
    }
  }
  engine.WaitForAll();
}

}  // namespace ember::bench
