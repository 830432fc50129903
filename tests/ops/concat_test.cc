// ConcatColumns, SplitColumns and SliceRows against their definition (concat.h), on
// every engine type: a pure copy, so results are compared exactly.

#include "ops/concat.h"

#include <vector>

#include "tests/ops/dense_test_util.h"

namespace ember::ops::testing {
namespace {

class ConcatTest : public DenseOpTest {
 protected:
  // whole[b, :] = [a[b, :], b_[b, :]], from row-major parts of the given widths.
  static std::vector<float> Joined(const std::vector<std::vector<float>>& parts,
                                   const std::vector<int64_t>& widths, int64_t rows) {
    std::vector<float> whole;
    for (int64_t r = 0; r < rows; ++r) {
      for (std::size_t k = 0; k < parts.size(); ++k) {
        const auto begin = parts[k].begin() + r * widths[k];
        whole.insert(whole.end(), begin, begin + widths[k]);
      }
    }
    return whole;
  }
};

TEST_P(ConcatTest, ConcatenatesColumnsIntoAThreeDimensionalWhole) {
  // DLRM's interaction input: the bottom output [B, D] and the pooled
  // embeddings [B, T*D] as [B, T+1, D].
  const int64_t batch = 5, dim = 3, tables = 4;
  std::vector<float> dense, pooled;
  Tensor a = Random({batch, dim}, &dense);
  Tensor b = Random({batch, tables * dim}, &pooled);
  Tensor out = Empty({batch, tables + 1, dim});
  ConcatColumns({&a, &b}, out);
  EXPECT_EQ(ToHost<float>(out), Joined({dense, pooled}, {dim, tables * dim}, batch));
}

TEST_P(ConcatTest, SplitIsTheInverseOfConcat) {
  const int64_t batch = 7;
  std::vector<float> x, y, z;
  Tensor a = Random({batch, 2}, &x);
  Tensor b = Random({batch, 3, 2}, &y);
  Tensor c = Random({batch}, &z);  // one column
  Tensor whole = Empty({batch, 9});
  ConcatColumns({&a, &b, &c}, whole);
  EXPECT_EQ(ToHost<float>(whole), Joined({x, y, z}, {2, 6, 1}, batch));
  Tensor a2 = Empty({batch, 2});
  Tensor b2 = Empty({batch, 6});
  Tensor c2 = Empty({batch, 1});
  SplitColumns(whole, {&a2, &b2, &c2});
  EXPECT_EQ(ToHost<float>(a2), x);
  EXPECT_EQ(ToHost<float>(b2), y);
  EXPECT_EQ(ToHost<float>(c2), z);
}

TEST_P(ConcatTest, OnePartIsACopyAndNoRowsIsNothing) {
  std::vector<float> x;
  Tensor a = Random({4, 3}, &x);
  Tensor out = Empty({4, 3});
  ConcatColumns({&a}, out);
  EXPECT_EQ(ToHost<float>(out), x);
  Tensor none = Empty({0, 3});
  Tensor none_out = Empty({0, 3});
  ConcatColumns({&none}, none_out);
  EXPECT_TRUE(ToHost<float>(none_out).empty());
}

// The slices of a batch, e.g. a [B, F, D] one's in three parts, are its
// rows in order; an empty slice at the end is nothing.
TEST_P(ConcatTest, SliceRowsCopiesConsecutiveRows) {
  std::vector<float> x;
  Tensor whole = Random({9, 2, 3}, &x);
  for (int64_t first : {0, 3, 6}) {
    Tensor part = Empty({3, 6});
    SliceRows(whole, first, part);
    EXPECT_EQ(ToHost<float>(part),
              std::vector<float>(x.begin() + first * 6, x.begin() + (first + 3) * 6))
        << "rows from " << first;
  }
  Tensor none = Empty({0, 2, 3});
  SliceRows(whole, 9, none);
  EXPECT_TRUE(ToHost<float>(none).empty());
  Tensor too_many = Empty({4, 6});
  ExpectInvalid([&] { SliceRows(whole, 6, too_many); },
                "[SliceRows] rows [6, 10) of `input`, which has 9");
  ExpectInvalid([&] { SliceRows(whole, -1, too_many); },
                "[SliceRows] rows [-1, 3) of `input`, which has 9");
  Tensor narrow = Empty({3, 5});
  ExpectInvalid([&] { SliceRows(whole, 0, narrow); },
                "[SliceRows] `out` has shape [3, 5]; rows of `input` (shape [9, 2, 3]) have 6 "
                "columns");
  ExpectInvalid([&] { SliceRows(whole, 0, whole); },
                "[SliceRows] `out` and `input` are one tensor");
}

TEST_P(ConcatTest, RejectsBadArguments) {
  Tensor a = Empty({4, 2});
  Tensor b = Empty({3, 2});
  Tensor out = Empty({4, 4});
  ExpectInvalid(
      [&] {
        ConcatColumns({&a, &b}, out);
      },
      "[ConcatColumns] `parts[1]` has 3 rows (shape [3, 2]); `out` has 4");
  Tensor c = Empty({4, 3});
  ExpectInvalid(
      [&] {
        ConcatColumns({&a, &c}, out);
      },
      "[ConcatColumns] the parts have 5 columns in all; `out` has 4 (shape [4, 4])");
  ExpectInvalid(
      [&] {
        ConcatColumns({&a, &out}, out);
      },
      "[ConcatColumns] `out` and `parts[1]` are one tensor");
  ExpectInvalid([&] { ConcatColumns({}, out); }, "[ConcatColumns] 0 parts; expected 1 to 4");
  ExpectInvalid(
      [&] {
        ConcatColumns({&a, &a, &a, &a, &a}, out);
      },
      "[ConcatColumns] 5 parts; expected 1 to 4");
  Tensor ints = Tensor::Empty(*engine_, {4, 2}, DType::kI64, engine::Context::CPU());
  ExpectInvalid(
      [&] {
        ConcatColumns({&a, &ints}, out);
      },
      "[ConcatColumns] `parts[1]` is i64; expected f32");
  Tensor d = Empty({4, 2});
  ExpectInvalid(
      [&] {
        SplitColumns(out, {&d, &d});
      },
      "[SplitColumns] `parts[1]` and `parts[0]` are one tensor");
  ExpectInvalid([&] { SplitColumns(out, {&out}); },
                "[SplitColumns] `input` and `parts[0]` are one tensor");
  ExpectInvalid([&] { SplitColumns(out, {&d, nullptr}); }, "[SplitColumns] `parts[1]` is null");
}

INSTANTIATE_TEST_SUITE_P(Dense, ConcatTest, ::testing::ValuesIn(EngineNames()), EngineParamName);

}  // namespace
}  // namespace ember::ops::testing
