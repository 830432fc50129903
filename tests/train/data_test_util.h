#pragma once

// What the data tests share: an engine, files in the test's temp dir,
// batches unpacked into plain values, and the check of an exception's type
// and message.

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "tools/train/data/batch.h"
#include "tools/train/data/batch_source.h"

namespace ember::train::testing {

// Expects `fn` to throw E with every one of `parts` in its message.
template <typename E>
void ExpectThrowWith(const std::function<void()>& fn, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "no exception thrown";
  } catch (const E& e) {
    for (const std::string& part : parts) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << "'" << e.what() << "' lacks '" << part << "'";
    }
  }
}

// A fresh engine (ThreadedEnginePerDevice, CPU workers only on this machine).
std::unique_ptr<engine::Engine> MakeEngine();

// A path in the temp dir unique to this test and process, ending in `name`.
std::string TempPath(std::string_view name);
// Writes `content` to TempPath(name) and returns the path.
std::string WriteTempFile(std::string_view name, std::string_view content);

// One example of a batch, unpacked.
struct Example {
  float label = 0;
  std::vector<float> dense;
  std::vector<std::vector<int64_t>> bags;  // per table
  friend bool operator==(const Example&, const Example&) = default;
};

// The batch's examples; checks the layout (shapes, offsets) on the way.
std::vector<Example> Unpack(const HostBatch& batch, const DataSpec& spec);

// Every batch the source has left.
std::vector<HostBatch> ReadAll(BatchSource& source, const BatchMemory& memory);
// Every example the source has left.
std::vector<Example> ReadExamples(BatchSource& source, const BatchMemory& memory);

// The tensors' bytes, for bitwise comparisons.
std::vector<uint8_t> Bytes(const HostBatch& batch);

}  // namespace ember::train::testing
