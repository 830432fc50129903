// Size classes: what a caching pool rounds requests to.

#include "storage/internal/size_classes.h"

#include <limits>

#include <gtest/gtest.h>

#include "storage/memory.h"

namespace ember::storage::internal {
namespace {

TEST(SizeClassesTest, RoundGivesPowersOfTwoUpToTheCutoffThenMultiplesOfIt) {
  const SizeClasses classes = SizeClasses::Round(4096, 20);  // cutoff 1 MiB
  EXPECT_EQ(classes.Round(1), 4096u);
  EXPECT_EQ(classes.Round(4096), 4096u);
  EXPECT_EQ(classes.Round(4097), 8192u);
  EXPECT_EQ(classes.Round(600'000), 1u << 20);
  EXPECT_EQ(classes.Round(1u << 20), 1u << 20);
  EXPECT_EQ(classes.Round((1u << 20) + 1), 2u << 20);
  EXPECT_EQ(classes.Round((5u << 20) - 7), 5u << 20) << "linear above the cutoff";
}

TEST(SizeClassesTest, ExactRoundsToThePage) {
  const SizeClasses classes = SizeClasses::Exact(4096);
  EXPECT_EQ(classes.Round(1), 4096u);
  EXPECT_EQ(classes.Round(4097), 8192u);
  EXPECT_EQ(classes.Round(3 * 4096 + 1), 4 * 4096u);
}

TEST(SizeClassesTest, SizesThatCannotBeRoundedAreOutOfMemory) {
  const std::size_t huge = std::numeric_limits<std::size_t>::max() - 10;
  EXPECT_THROW(SizeClasses::Exact(4096).Round(huge), OutOfMemory);
  EXPECT_THROW(SizeClasses::Round(4096, 24).Round(huge), OutOfMemory);
}

}  // namespace
}  // namespace ember::storage::internal
