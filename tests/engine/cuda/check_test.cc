// CudaCheck: failures become CudaError with what, the CUDA error and where.
// Needs no GPU: error names come from the runtime library alone.

#include "engine/cuda/check.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/cuda/handles.h"
#include "engine/error.h"

namespace ember {
namespace {

using ::testing::HasSubstr;

TEST(CudaCheckTest, SuccessDoesNotThrow) {
  EXPECT_NO_THROW(CudaCheck(cudaSuccess, "nothing"));
  EXPECT_TRUE(CudaLogIfError(cudaSuccess, "nothing"));
}

TEST(CudaCheckTest, FailureNamesTheCallTheErrorAndThePlace) {
  try {
    CudaCheck(cudaErrorInvalidValue, "cudaMemcpyAsync for op 'copy'");
    FAIL() << "no exception";
  } catch (const CudaError& e) {
    EXPECT_THAT(e.what(), HasSubstr("[cudaMemcpyAsync for op 'copy']"));
    EXPECT_THAT(e.what(), HasSubstr("cudaErrorInvalidValue"));
    EXPECT_THAT(e.what(), HasSubstr("check_test.cc:"));
  }
}

TEST(CudaCheckTest, ForOpNamesTheOp) {
  try {
    CudaCheckForOp(cudaErrorInvalidValue, "cudaMemcpyAsync", "copy");
    FAIL() << "no exception";
  } catch (const CudaError& e) {
    EXPECT_THAT(e.what(), HasSubstr("[cudaMemcpyAsync of op 'copy'] cudaErrorInvalidValue"));
  }
}

TEST(CudaHandlesTest, DefaultHandlesOwnNothingAndMoveOut) {
  CudaEvent event;
  EXPECT_FALSE(event);
  CudaStream stream;
  CudaStream moved = std::move(stream);
  EXPECT_FALSE(moved);
}

TEST(CudaCheckTest, LoggingTwinReportsFailureWithoutThrowing) {
  EXPECT_FALSE(CudaLogIfError(cudaErrorInvalidValue, "in a destructor"));
}

}  // namespace
}  // namespace ember
