// CompareStates (tools/train/model_state.h): bit for bit, section by
// section; what differs is counted, the largest gap named, sections in one
// state only listed.

#include "tools/train/model_state.h"

#include <cmath>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace ember::train {
namespace {

using ::testing::HasSubstr;

TEST(ModelStateTest, IdenticalStatesAreIdentical) {
  const ModelState a = {{"bottom.0.weight", {1.0f, -2.0f}}, {"tables.weights", {0.5f}}};
  const StateDifference d = CompareStates(a, a);
  EXPECT_TRUE(d.identical());
  EXPECT_EQ(d.Describe(), "identical: 2 sections, 3 values bit for bit");
}

TEST(ModelStateTest, DifferencesAreCountedAndTheLargestNamed) {
  const ModelState a = {{"w", {1.0f, 2.0f, 0.0f}}, {"only_a", {1.0f}}, {"sized", {1.0f}}};
  const ModelState b = {{"w", {1.0f, 2.5f, -0.0f}}, {"only_b", {1.0f}}, {"sized", {1.0f, 2.0f}}};
  const StateDifference d = CompareStates(a, b);
  EXPECT_FALSE(d.identical());
  EXPECT_EQ(d.values_differ, 2);  // 2.0 vs 2.5, and +0 vs -0 (bits)
  EXPECT_EQ(d.largest, 0.5);
  EXPECT_EQ(d.largest_in, "w");
  EXPECT_THAT(d.Describe(), HasSubstr("2 of 3 values differ, the largest by 0.5 (in w)"));
  EXPECT_THAT(d.Describe(), HasSubstr("not in both or of two sizes: "));
  EXPECT_THAT(d.unmatched, ::testing::UnorderedElementsAre("only_a", "only_b", "sized"));
}

TEST(ModelStateTest, ANanIsTheLargestDifference) {
  const ModelState a = {{"w", {1.0f, 1.0f}}};
  const ModelState b = {{"w", {1.5f, std::nanf("")}}};
  const StateDifference d = CompareStates(a, b);
  EXPECT_EQ(d.values_differ, 2);
  EXPECT_TRUE(std::isnan(d.largest));
}

}  // namespace
}  // namespace ember::train
