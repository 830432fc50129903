// Criteo's TSV layout: parsing with empty fields, DLRM's transform, every
// error kind (the message names the file, the line and the field), skipping
// bad lines on request, several files, and Seek.

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/error.h"
#include "storage/memory.h"
#include "tests/train/criteo_test_lines.h"
#include "tests/train/data_test_util.h"
#include "tools/train/data/criteo_line.h"
#include "tools/train/data/criteo_text_source.h"

namespace ember::train {
namespace {

using testing::Example;
using testing::ExpectThrowWith;
using testing::GoodLine;
using testing::GoodLines;
using testing::Line;
using testing::Rows;

class CriteoTextTest : public ::testing::Test {
 protected:
  std::unique_ptr<engine::Engine> engine_ = testing::MakeEngine();
  BatchMemory memory_{.engine = engine_.get(), .kind = storage::MemoryKind::kCpu};

  CriteoTextOptions Options(std::vector<std::string> paths, int64_t batch_size = 3) {
    return CriteoTextOptions{.batch_size = batch_size, .paths = std::move(paths), .rows = Rows()};
  }
  // The message of the error the first Next of `text` (as file `name`) throws.
  void ExpectError(const std::string& name, const std::string& text,
                   std::initializer_list<std::string> parts) {
    const std::string path = testing::WriteTempFile(name, text);
    CriteoTextSource source(Options({path}, 100));
    ExpectThrowWith<InvalidArgument>([&] { (void)source.Next(memory_); }, parts);
  }
};

TEST_F(CriteoTextTest, ParsesEmptyFieldsAndTransformsAsDlrm) {
  const std::string text =
      Line("1", {"0", "", "-3", "12", "1000000"}, {"68fd1e64", "", "FFFFFFFF", "0", "1"}) +
      Line("0", {}, {});
  const std::string path = testing::WriteTempFile("day.tsv", text);
  CriteoTextSource source(Options({path}));
  const auto examples = testing::ReadExamples(source, memory_);
  ASSERT_EQ(examples.size(), 2u);
  const Example& a = examples[0];
  EXPECT_EQ(a.label, 1.0f);
  EXPECT_EQ(a.dense[0], 0.0f);                   // log(1 + 0)
  EXPECT_EQ(a.dense[1], 0.0f);                   // empty: 0
  EXPECT_EQ(a.dense[2], 0.0f);                   // negative: clamped to 0
  EXPECT_FLOAT_EQ(a.dense[3], std::log(13.0f));  // log(1 + 12)
  EXPECT_FLOAT_EQ(a.dense[4], static_cast<float>(std::log1p(1e6)));
  const std::vector<int64_t> rows = Rows();
  EXPECT_EQ(a.bags[0], (std::vector<int64_t>{0x68fd1e64 % rows[0]}));
  EXPECT_EQ(a.bags[1], (std::vector<int64_t>{0}));  // empty: value 0, row 0
  EXPECT_EQ(a.bags[2], (std::vector<int64_t>{0xFFFFFFFFll % rows[2]}));
  EXPECT_EQ(a.bags[3], (std::vector<int64_t>{0}));
  EXPECT_EQ(a.bags[4], (std::vector<int64_t>{1}));
  const Example& b = examples[1];
  EXPECT_EQ(b.label, 0.0f);
  for (float d : b.dense) EXPECT_EQ(d, 0.0f);
  for (const auto& bag : b.bags) EXPECT_EQ(bag, (std::vector<int64_t>{0}));
}

TEST_F(CriteoTextTest, BatchesAndTheShortLastOne) {
  const std::string path = testing::WriteTempFile("day.tsv", GoodLines(0, 8));
  CriteoTextSource source(Options({path}));
  EXPECT_FALSE(source.size().has_value());
  const auto batches = testing::ReadAll(source, memory_);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[0].batch_size, 3);
  EXPECT_EQ(batches[2].batch_size, 2);
  EXPECT_EQ(batches[2].position, 8);
  EXPECT_FALSE(source.Next(memory_).has_value());
}

TEST_F(CriteoTextTest, CrLfAndAMissingLastNewlineAreFine) {
  std::string crlf = GoodLine(0);
  crlf.insert(crlf.size() - 1, "\r");
  std::string last = GoodLine(1);
  last.pop_back();
  const std::string path = testing::WriteTempFile("day.tsv", crlf + last);
  CriteoTextSource source(Options({path}));
  const auto examples = testing::ReadExamples(source, memory_);
  ASSERT_EQ(examples.size(), 2u);
  const std::string plain = testing::WriteTempFile("plain.tsv", GoodLines(0, 2));
  CriteoTextSource reference(Options({plain}));
  EXPECT_EQ(testing::ReadExamples(reference, memory_), examples);
}

TEST_F(CriteoTextTest, EveryErrorNamesFileLineAndField) {
  const std::string good = GoodLines(0, 4);
  const std::vector<std::string> ints(kCriteoNumDense, "1");
  const std::vector<std::string> cats(kCriteoNumSparse, "1");
  std::vector<std::string> bad_cats = cats;
  ExpectError("fields.tsv", good + "1\t2\t3\n",
              {"[CriteoTextSource] ", "fields.tsv:5: has 3 fields; a Criteo line has 40"});
  std::string line39 = GoodLine(0);
  line39.erase(line39.rfind('\t'));
  line39 += "\n";
  ExpectError("fields39.tsv", line39, {"fields39.tsv:1: has 39 fields; a Criteo line has 40"});
  ExpectError("fields41.tsv", good + "\t" + GoodLine(9), {"fields41.tsv:5: has 41 fields"});
  ExpectError("empty.tsv", good + "\n" + good, {"empty.tsv:5: is empty"});
  ExpectError("label.tsv", Line("2", ints, cats), {"label.tsv:1: field 1 ('2'): ", "not 0 or 1"});
  ExpectError("nolabel.tsv", Line("", ints, cats), {"nolabel.tsv:1: field 1 (''): ", "empty"});
  std::vector<std::string> bad_ints = ints;
  bad_ints[1] = "12a";
  ExpectError("int.tsv", good + Line("0", bad_ints, cats),
              {"int.tsv:5: field 3 ('12a'): not an integer"});
  bad_ints[1] = "1.5";
  ExpectError("float.tsv", Line("0", bad_ints, cats), {"float.tsv:1: field 3 ('1.5')"});
  bad_ints[1] = "99999999999999999999";
  ExpectError("big.tsv", Line("0", bad_ints, cats),
              {"big.tsv:1: field 3 ('99999999999999999999'): ", "does not fit 64 bits"});
  bad_cats[0] = "zz12";
  ExpectError("hex.tsv", Line("0", ints, bad_cats),
              {"[CriteoTextSource] ", "hex.tsv:1: field 15 ('zz12'): not a hexadecimal number"});
  bad_cats[0] = "1";
  bad_cats[25] = "123456789";
  ExpectError("hex9.tsv", good + good + Line("0", ints, bad_cats),
              {"hex9.tsv:9: field 40 ('123456789'): ", "does not fit 32 bits"});
  bad_cats[25] = "-1";
  ExpectError("neg.tsv", Line("0", ints, bad_cats), {"neg.tsv:1: field 40 ('-1')"});
  bad_cats[25] = "0x1f";
  ExpectError("prefix.tsv", Line("0", ints, bad_cats), {"prefix.tsv:1: field 40 ('0x1f')"});
  // An unprintable byte is escaped, a long field shortened.
  bad_cats[25] = std::string("a\x01") + std::string(100, 'b');
  ExpectError("odd.tsv", Line("0", ints, bad_cats), {"field 40 ('a\\001bbb", "...')"});
}

TEST_F(CriteoTextTest, EmptyFileHasNoExamples) {
  const std::string path = testing::WriteTempFile("empty.tsv", "");
  CriteoTextSource source(Options({path}));
  EXPECT_FALSE(source.Next(memory_).has_value());
}

TEST_F(CriteoTextTest, AMissingFileIsNamed) {
  CriteoTextSource source(Options({testing::TempPath("no_such.tsv")}));
  ExpectThrowWith<InvalidArgument>([&] { (void)source.Next(memory_); },
                                   {"[CriteoTextSource]", "cannot open", "no_such.tsv"});
}

TEST_F(CriteoTextTest, AnErrorRepeatsUntilSeek) {
  const std::string path =
      testing::WriteTempFile("bad.tsv", GoodLines(0, 4) + "oops\n" + GoodLines(4, 4));
  CriteoTextSource source(Options({path}, 2));
  ASSERT_TRUE(source.Next(memory_).has_value());  // lines 1-2
  ASSERT_TRUE(source.Next(memory_).has_value());  // lines 3-4
  for (int i = 0; i < 2; ++i) {
    ExpectThrowWith<InvalidArgument>([&] { (void)source.Next(memory_); }, {"bad.tsv:5:"});
    EXPECT_EQ(source.position(), 4);
  }
  source.Seek(1);
  EXPECT_EQ(source.position(), 1);
  const auto batch = source.Next(memory_);
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(batch->position, 3);
}

TEST_F(CriteoTextTest, SkipsAndCountsBadLinesOnlyWhenAsked) {
  const std::string text =
      GoodLines(0, 3) + "bad\n" + GoodLines(3, 2) + Line("7", {}, {}) + GoodLines(5, 1);
  const std::string path = testing::WriteTempFile("day.tsv", text);
  CriteoTextOptions options = Options({path});
  options.skip_bad_lines = true;
  CriteoTextSource source(options);
  const auto examples = testing::ReadExamples(source, memory_);
  EXPECT_EQ(source.skipped_lines(), 2);
  const std::string clean = testing::WriteTempFile("clean.tsv", GoodLines(0, 6));
  CriteoTextSource reference(Options({clean}));
  EXPECT_EQ(examples, testing::ReadExamples(reference, memory_));
}

TEST_F(CriteoTextTest, SeveralFilesReadAsOneSequence) {
  const std::string a = testing::WriteTempFile("a.tsv", GoodLines(0, 4));
  const std::string b = testing::WriteTempFile("b.tsv", GoodLines(4, 3));
  const std::string all = testing::WriteTempFile("all.tsv", GoodLines(0, 7));
  CriteoTextSource split(Options({a, b}));
  CriteoTextSource whole(Options({all}));
  EXPECT_EQ(testing::ReadExamples(split, memory_), testing::ReadExamples(whole, memory_));
  // An error in the second file names it, with its own line number.
  const std::string bad = testing::WriteTempFile("c.tsv", GoodLines(0, 1) + "x\n");
  CriteoTextSource source(Options({a, bad}, 100));
  ExpectThrowWith<InvalidArgument>([&] { (void)source.Next(memory_); }, {"c.tsv:2:"});
}

TEST_F(CriteoTextTest, SeekGivesWhatReadingStraightGives) {
  const std::string a = testing::WriteTempFile("a.tsv", GoodLines(0, 5));
  const std::string b = testing::WriteTempFile("b.tsv", GoodLines(5, 6));
  CriteoTextSource straight_source(Options({a, b}));
  const auto straight = testing::ReadExamples(straight_source, memory_);
  ASSERT_EQ(straight.size(), 11u);
  CriteoTextSource source(Options({a, b}));
  for (int64_t p : {7, 2, 0, 5, 11}) {
    source.Seek(p);
    const auto resumed = testing::ReadExamples(source, memory_);
    EXPECT_EQ(resumed, std::vector<Example>(straight.begin() + p, straight.end())) << "from " << p;
  }
  ExpectThrowWith<InvalidArgument>([&] { source.Seek(12); },
                                   {"[CriteoTextSource::Seek]", "example 12", "hold 11"});
}

TEST_F(CriteoTextTest, RefusesAModelThatIsNotCriteoShaped) {
  ExpectThrowWith<InvalidArgument>(
      [] {
        CriteoTextSource s(CriteoTextOptions{.paths = {"x"}, .rows = std::vector<int64_t>(25, 10)});
      },
      {"[CriteoTextSource]", "25 tables", "26"});
  ExpectThrowWith<InvalidArgument>(
      [] {
        std::vector<int64_t> rows(26, 10);
        rows[3] = 0;
        CriteoTextSource s(CriteoTextOptions{.paths = {"x"}, .rows = rows});
      },
      {"rows[3] = 0"});
  ExpectThrowWith<InvalidArgument>(
      [] { CriteoTextSource s(CriteoTextOptions{.rows = std::vector<int64_t>(26, 10)}); },
      {"no input files"});
}

}  // namespace
}  // namespace ember::train
