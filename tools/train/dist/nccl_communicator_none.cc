// NcclCommunicator in a build without NCCL (nccl_communicator.h): the type
// exists, so that callers and tests compile everywhere; making one throws.

#include "engine/error.h"
#include "tools/train/dist/nccl_communicator.h"

namespace ember::train {
namespace {

[[noreturn]] void NoNccl(std::string_view where) {
  throw Unavailable(std::string(where) + " this build of Ember has no NCCL (it needs CUDA)");
}

}  // namespace

struct NcclCommunicator::Nccl {};

bool NcclAvailable() { return false; }

NcclUniqueId NcclUniqueId::Create() { NoNccl("[NcclUniqueId::Create]"); }

NcclCommunicator::NcclCommunicator(int rank, int world_size, int device, const NcclUniqueId&,
                                   const NcclCommunicatorOptions&)
    : Communicator(rank, world_size), device_(device) {
  NoNccl("[NcclCommunicator]");
}

NcclCommunicator::~NcclCommunicator() = default;

void NcclCommunicator::DoAllToAllV(std::span<const std::byte>, std::span<const int64_t>,
                                   std::span<std::byte>, std::span<const int64_t>,
                                   std::string_view) {
  NoNccl("[NcclCommunicator::AllToAllV]");
}

void NcclCommunicator::DoAllReduceSum(std::span<float>, std::string_view) {
  NoNccl("[NcclCommunicator::AllReduceSum]");
}

void NcclCommunicator::DoAllReduceSumParts(std::span<const std::span<float>>, std::string_view) {
  NoNccl("[NcclCommunicator::AllReduceSum]");
}

void NcclCommunicator::DoBarrier(std::string_view) { NoNccl("[NcclCommunicator::Barrier]"); }

void NcclCommunicator::DoIssueAfter(void*) { NoNccl("[NcclCommunicator::IssueAfter]"); }

const std::vector<CollectiveTiming>& NcclCommunicator::timings() const {
  NoNccl("[NcclCommunicator::timings]");
}

bool NcclCommunicator::Abort(std::string_view) noexcept { return false; }

}  // namespace ember::train
