#include "tools/bench/engine/starpu_peer.h"

#include "engine/error.h"

// The peers are optional (EMBER_BUILD_BENCH_PEERS); without StarPU this file
// compiles to stubs so that the cases carry no #if.
#ifdef EMBER_BENCH_WITH_STARPU

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include <starpu.h>

#include "absl/strings/str_format.h"

namespace ember::bench {
namespace {

// What one task needs besides its buffers. The tasks compute through `data`
// rather than through their buffers: with CPU workers only, StarPU never
// copies a var away from its home in `data`, and ApplyOp wants the whole
// vector.
struct TaskArg {
  const engine::testing::WorkloadOp* op;
  std::vector<uint64_t>* data;
};

void RunTask(void* /*buffers*/[], void* cl_arg) {
  const auto* arg = static_cast<const TaskArg*>(cl_arg);
  (*arg->data)[arg->op->write] = engine::testing::ApplyOp(*arg->op, *arg->data);
}

// Ops name up to 20 vars, more than STARPU_NMAXBUFS (8), so the codelet takes
// a variable number of buffers.
starpu_codelet MakeCodelet() {
  starpu_codelet codelet;
  starpu_codelet_init(&codelet);
  codelet.cpu_funcs[0] = RunTask;
  codelet.nbuffers = STARPU_VARIABLE_NBUFFERS;
  codelet.name = "ember_bench_op";
  return codelet;
}

// The task's data: each var once, as StarPU requires, the written var with
// STARPU_RW when the op also reads it.
void DescribeData(const engine::testing::WorkloadOp& op,
                  const std::vector<starpu_data_handle_t>& handles,
                  std::vector<starpu_data_descr>* descrs) {
  descrs->clear();
  bool reads_write = false;
  for (int var : op.reads) {
    if (var == op.write) {
      reads_write = true;
      continue;
    }
    const bool seen = std::any_of(descrs->begin(), descrs->end(), [&](const starpu_data_descr& d) {
      return d.handle == handles[var];
    });
    if (!seen) descrs->push_back({handles[var], STARPU_R});
  }
  descrs->push_back({handles[op.write], reads_write ? STARPU_RW : STARPU_W});
}

}  // namespace

bool StarPUPeerBuilt() { return true; }

StarPUPeer::StarPUPeer(int cpus) {
  // StarPU prints a banner and hints on stderr unless told otherwise; it
  // reads this only from the environment.
  setenv("STARPU_SILENT", "1", /*overwrite=*/0);
  starpu_conf conf;
  starpu_conf_init(&conf);
  conf.ncpus = cpus;
  conf.ncuda = 0;
  conf.nopencl = 0;
  conf.nmic = 0;
  conf.nmpi_ms = 0;
  const int status = starpu_init(&conf);
  if (status != 0) {
    throw Unavailable(
        absl::StrFormat("[StarPUPeer] starpu_init with %d CPU workers failed: %d", cpus, status));
  }
  int major = 0, minor = 0, release = 0;
  starpu_get_version(&major, &minor, &release);
  const starpu_sched_policy* policy = starpu_sched_ctx_get_sched_policy(0);
  description_ =
      absl::StrFormat("StarPU %d.%d.%d, scheduler %s, %u CPU workers", major, minor, release,
                      policy ? policy->policy_name : "?", starpu_cpu_worker_get_count());
}

StarPUPeer::~StarPUPeer() { starpu_shutdown(); }

double StarPUPeer::Run(const engine::testing::Workload& workload, std::vector<uint64_t>* data) {
  std::vector<starpu_data_handle_t> handles(workload.num_vars);
  for (int var = 0; var < workload.num_vars; ++var) {
    starpu_variable_data_register(&handles[var], STARPU_MAIN_RAM,
                                  reinterpret_cast<uintptr_t>(&(*data)[var]), sizeof(uint64_t));
  }
  std::vector<TaskArg> args;
  args.reserve(workload.ops.size());
  for (const auto& op : workload.ops) args.push_back({&op, data});
  starpu_codelet codelet = MakeCodelet();
  std::vector<starpu_data_descr> descrs;

  const auto start = std::chrono::steady_clock::now();
  for (TaskArg& arg : args) {
    DescribeData(*arg.op, handles, &descrs);
    const int status = starpu_task_insert(&codelet, STARPU_DATA_MODE_ARRAY, descrs.data(),
                                          static_cast<int>(descrs.size()), STARPU_CL_ARGS_NFREE,
                                          &arg, sizeof(arg), 0);
    if (status != 0)
      throw Unavailable(absl::StrFormat("[StarPUPeer::Run] task insert: %d", status));
  }
  starpu_task_wait_for_all();
  const auto stop = std::chrono::steady_clock::now();

  for (starpu_data_handle_t handle : handles) starpu_data_unregister(handle);
  return std::chrono::duration<double>(stop - start).count();
}

}  // namespace ember::bench

#else  // !EMBER_BENCH_WITH_STARPU

namespace ember::bench {

bool StarPUPeerBuilt() { return false; }

StarPUPeer::StarPUPeer(int) {
  throw Unavailable("[StarPUPeer] ember-bench-engine was built without StarPU");
}

StarPUPeer::~StarPUPeer() = default;

double StarPUPeer::Run(const engine::testing::Workload&, std::vector<uint64_t>*) { return 0; }

}  // namespace ember::bench

#endif  // EMBER_BENCH_WITH_STARPU
