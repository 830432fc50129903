// Criteo's binary form: TSV -> binary -> batches equal the text path's,
// several files and Seek, and every refusal: tables other than the model's
// (naming what differs), a truncated or overlong file (expected and actual
// size), a bad magic or version, a corrupt record, a failed conversion
// (which leaves no output).

#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/error.h"
#include "storage/memory.h"
#include "tests/train/criteo_test_lines.h"
#include "tests/train/data_test_util.h"
#include "tools/train/data/criteo_binary_format.h"
#include "tools/train/data/criteo_binary_source.h"
#include "tools/train/data/criteo_convert.h"
#include "tools/train/data/criteo_text_source.h"

namespace ember::train {
namespace {

using testing::ExpectThrowWith;
using testing::GoodLines;
using testing::Rows;

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class CriteoBinaryTest : public ::testing::Test {
 protected:
  std::unique_ptr<engine::Engine> engine_ = testing::MakeEngine();
  BatchMemory memory_{.engine = engine_.get(), .kind = storage::MemoryKind::kCpu};

  static DataSpec Spec() { return DataSpec{.num_dense = kCriteoNumDense, .rows = Rows()}; }

  // Converts `text` (as file `name`.tsv) into `name`.bin; returns its path.
  static std::string Convert(const std::string& name, const std::string& text) {
    const std::string tsv = testing::WriteTempFile(name + ".tsv", text);
    std::string bin = testing::TempPath(name + ".bin");
    (void)ConvertCriteoText({tsv}, bin, ConvertOptions{.rows = Rows()});
    return bin;
  }
  static CriteoBinaryOptions Options(std::vector<std::string> paths, int64_t batch_size = 3) {
    return CriteoBinaryOptions{.batch_size = batch_size, .paths = std::move(paths), .spec = Spec()};
  }
  // The refusal the source's construction throws for `bytes` (as a file).
  void ExpectRefused(const std::string& bytes, std::initializer_list<std::string> parts,
                     DataSpec spec = Spec()) {
    const std::string path = testing::WriteTempFile("edited.bin", bytes);
    ExpectThrowWith<InvalidArgument>(
        [&] {
          CriteoBinarySource source(
              CriteoBinaryOptions{.batch_size = 3, .paths = {path}, .spec = spec});
        },
        parts);
  }
};

TEST_F(CriteoBinaryTest, RoundTripEqualsTheTextPath) {
  const std::string text = GoodLines(0, 8);
  const std::string bin = Convert("day", text);
  EXPECT_FALSE(Exists(bin + ".tmp"));
  CriteoTextSource text_source(
      CriteoTextOptions{.batch_size = 3, .paths = {testing::TempPath("day.tsv")}, .rows = Rows()});
  CriteoBinarySource binary(Options({bin}));
  EXPECT_EQ(binary.size(), 8);
  const auto from_text = testing::ReadAll(text_source, memory_);
  const auto from_binary = testing::ReadAll(binary, memory_);
  ASSERT_EQ(from_binary.size(), 3u);
  ASSERT_EQ(from_text.size(), from_binary.size());
  for (size_t i = 0; i < from_text.size(); ++i) {
    EXPECT_EQ(from_binary[i].batch_size, from_text[i].batch_size);
    EXPECT_EQ(from_binary[i].position, from_text[i].position);
    EXPECT_EQ(testing::Bytes(from_binary[i]), testing::Bytes(from_text[i])) << "batch " << i;
  }
  EXPECT_EQ(from_binary.back().batch_size, 2);
  EXPECT_FALSE(binary.Next(memory_).has_value());
  // The file is exactly header + records.
  EXPECT_EQ(ReadFile(bin).size(), 64u + 26 * 8 + 48 + 8 * 160);
}

TEST_F(CriteoBinaryTest, SeveralFilesAndSeek) {
  const std::string a = Convert("a", GoodLines(0, 4));
  const std::string empty = Convert("empty", "");
  const std::string b = Convert("b", GoodLines(4, 5));
  const std::string all = Convert("all", GoodLines(0, 9));
  CriteoBinarySource split(Options({a, empty, b}, 2));
  CriteoBinarySource whole(Options({all}, 4));
  EXPECT_EQ(split.size(), 9);
  const auto straight = testing::ReadExamples(whole, memory_);
  EXPECT_EQ(testing::ReadExamples(split, memory_), straight);
  for (int64_t p : {3, 4, 8, 0, 9}) {
    split.Seek(p);
    EXPECT_EQ(testing::ReadExamples(split, memory_),
              std::vector<testing::Example>(straight.begin() + p, straight.end()))
        << "from " << p;
  }
  ExpectThrowWith<InvalidArgument>([&] { split.Seek(10); },
                                   {"[CriteoBinarySource::Seek]", "example 10", "[0, 9]"});
}

TEST_F(CriteoBinaryTest, RefusesTablesOtherThanTheModels) {
  const std::string bin = Convert("day", GoodLines(0, 2));
  DataSpec spec = Spec();
  spec.rows[4] = 999;
  spec.rows[7] = 5;
  ExpectThrowWith<InvalidArgument>(
      [&] { CriteoBinarySource source(CriteoBinaryOptions{.paths = {bin}, .spec = spec}); },
      {"[CriteoBinaryHeader] ", "day.bin: does not match the model's tables",
       "table 4 was hashed into 1148 rows, the model's has 999",
       "table 7 was hashed into 1259 rows, the model's has 5"});
  spec = Spec();
  spec.num_dense = 12;
  spec.rows.pop_back();
  ExpectThrowWith<InvalidArgument>(
      [&] { CriteoBinarySource source(CriteoBinaryOptions{.paths = {bin}, .spec = spec}); },
      {"the file has 13 dense features, the model 12", "the file has 26 tables, the model 25"});
}

TEST_F(CriteoBinaryTest, RefusesATruncatedOrOverlongFile) {
  const std::string bytes = ReadFile(Convert("day", GoodLines(0, 3)));
  const size_t full = bytes.size();  // 320 + 3 x 160 = 800
  ASSERT_EQ(full, 800u);
  ExpectRefused(
      bytes.substr(0, full - 1),
      {"edited.bin: is 799 bytes; its header promises 800 bytes", "3 examples x 160", "truncated"});
  ExpectRefused(bytes.substr(0, 400), {"is 400 bytes; its header promises 800 bytes", "truncated"});
  ExpectRefused(bytes.substr(0, 100),
                {"is 100 bytes, shorter than its 320-byte header: truncated"});
  ExpectRefused(bytes.substr(0, 10), {"is 10 bytes, shorter than the 64-byte header"});
  ExpectRefused("", {"is 0 bytes"});
  ExpectRefused(bytes + "x", {"is 801 bytes; its header promises 800 bytes", "trailing bytes"});
  // A count so large that its size overflows is still named.
  std::string huge = bytes;
  const uint64_t count = ~uint64_t{0} / 2;
  std::memcpy(huge.data() + 32, &count, sizeof(count));
  ExpectRefused(huge, {"is 800 bytes; its header promises more than 2^63 bytes", "truncated"});
}

TEST_F(CriteoBinaryTest, RefusesABadMagicOrVersion) {
  const std::string bytes = ReadFile(Convert("day", GoodLines(0, 1)));
  std::string edited = bytes;
  edited[0] = 'X';
  ExpectRefused(edited, {"edited.bin: bad magic 'XMBERCRT'", "not an Ember Criteo binary file"});
  ExpectRefused(GoodLines(0, 3), {"bad magic", "not an Ember Criteo binary file"});
  edited = bytes;
  edited[8] = 2;
  ExpectRefused(edited, {"edited.bin: format version 2; this reader reads version 1"});
  edited = bytes;
  edited[24] = 7;  // record_bytes
  ExpectRefused(edited, {"record_bytes is 7", "corrupt"});
}

TEST_F(CriteoBinaryTest, ACorruptRecordFailsTheBatchThatReachesIt) {
  std::string bytes = ReadFile(Convert("day", GoodLines(0, 5)));
  // Record 4, table 2: a row past the table's 1074 rows.
  const uint32_t bad_row = 5000;
  constexpr std::ptrdiff_t kAt = 320 + 4 * 160 + 4 + 13 * 4 + 2 * 4;
  std::memcpy(bytes.data() + kAt, &bad_row, 4);
  const std::string path = testing::WriteTempFile("corrupt.bin", bytes);
  CriteoBinarySource source(Options({path}));
  ASSERT_TRUE(source.Next(memory_).has_value());  // records 0-2
  for (int i = 0; i < 2; ++i) {
    ExpectThrowWith<InvalidArgument>(
        [&] { (void)source.Next(memory_); },
        {"[CriteoBinarySource] ", "corrupt.bin: record 4: table 2: row 5000 is not below", "1074"});
    EXPECT_EQ(source.position(), 3);
  }
  // A label that is not 0 or 1.
  const float label = 0.5f;
  std::memcpy(bytes.data() + 320, &label, 4);
  const std::string path2 = testing::WriteTempFile("label.bin", bytes);
  CriteoBinarySource source2(Options({path2}));
  ExpectThrowWith<InvalidArgument>([&] { (void)source2.Next(memory_); },
                                   {"label.bin: record 0: label 0.5 is not 0 or 1"});
}

// A dense value that log(1 + x) of a count cannot give: a NaN (which the
// bottom MLP's ReLU would pass on as 0 while its weights became NaN),
// an infinity or a negative value.
TEST_F(CriteoBinaryTest, ADenseValueThatIsNoTransformedCountIsCorrupt) {
  const std::string good = ReadFile(Convert("day", GoodLines(0, 5)));
  const struct {
    float value;
    const char* shown;
  } cases[] = {{std::numeric_limits<float>::quiet_NaN(), "nan"},
               {std::numeric_limits<float>::infinity(), "inf"},
               {-0.5f, "-0.5"}};
  for (const auto& c : cases) {
    std::string bytes = good;
    // Record 1, dense feature 6.
    constexpr std::ptrdiff_t kAt = 320 + 160 + 4 + 6 * 4;
    std::memcpy(bytes.data() + kAt, &c.value, 4);
    CriteoBinarySource source(Options({testing::WriteTempFile("dense.bin", bytes)}));
    ExpectThrowWith<InvalidArgument>([&] { (void)source.Next(memory_); },
                                     {"dense.bin: record 1: dense feature 6: ", c.shown,
                                      "is not a transformed count", "corrupt"});
  }
}

TEST_F(CriteoBinaryTest, AFailedConversionLeavesNoOutput) {
  const std::string tsv =
      testing::WriteTempFile("bad.tsv", GoodLines(0, 3) + "1\tzz\n" + GoodLines(3, 2));
  const std::string bin = testing::TempPath("bad.bin");
  ExpectThrowWith<InvalidArgument>(
      [&] { (void)ConvertCriteoText({tsv}, bin, ConvertOptions{.rows = Rows()}); },
      {"[ConvertCriteoText] ", "bad.tsv:4: has 2 fields"});
  EXPECT_FALSE(Exists(bin));
  EXPECT_FALSE(Exists(bin + ".tmp"));
  ExpectThrowWith<InvalidArgument>(
      [&] {
        (void)ConvertCriteoText({testing::TempPath("none.tsv")}, bin,
                                ConvertOptions{.rows = Rows()});
      },
      {"[ConvertCriteoText] ", "cannot open", "none.tsv"});
  EXPECT_FALSE(Exists(bin));
  ExpectThrowWith<InvalidArgument>(
      [&] {
        (void)ConvertCriteoText({tsv}, testing::TempPath("no_dir/x.bin"),
                                ConvertOptions{.rows = Rows()});
      },
      {"[CriteoBinaryWriter] cannot create", "no_dir/x.bin.tmp"});
}

TEST_F(CriteoBinaryTest, SkippedLinesAreCountedAndRecorded) {
  const std::string tsv =
      testing::WriteTempFile("bad.tsv", GoodLines(0, 3) + "1\tzz\n" + GoodLines(3, 2));
  const std::string bin = testing::TempPath("bad.bin");
  std::vector<ConvertProgress> reports;
  const ConvertProgress done = ConvertCriteoText(
      {tsv}, bin,
      ConvertOptions{.rows = Rows(),
                     .skip_bad_lines = true,
                     .progress = [&](const ConvertProgress& p) { reports.push_back(p); },
                     .progress_every = 2});
  EXPECT_EQ(done.examples, 5);
  EXPECT_EQ(done.skipped_lines, 1);
  EXPECT_EQ(done.bytes_read, done.bytes_total);
  ASSERT_EQ(reports.size(), 3u);  // at 2, 4 and the end
  EXPECT_EQ(reports[0].examples, 2);
  EXPECT_EQ(reports.back().examples, 5);
  const std::string bytes = ReadFile(bin);
  uint64_t skipped = 0, count = 0;
  std::memcpy(&count, bytes.data() + 32, 8);
  std::memcpy(&skipped, bytes.data() + 40, 8);
  EXPECT_EQ(count, 5u);
  EXPECT_EQ(skipped, 1u);
  CriteoBinarySource source(Options({bin}));
  const std::string clean = testing::WriteTempFile("clean.tsv", GoodLines(0, 5));
  CriteoTextSource reference(CriteoTextOptions{.batch_size = 3, .paths = {clean}, .rows = Rows()});
  EXPECT_EQ(testing::ReadExamples(source, memory_), testing::ReadExamples(reference, memory_));
}

}  // namespace
}  // namespace ember::train
