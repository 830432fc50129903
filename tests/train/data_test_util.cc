#include "tests/train/data_test_util.h"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/engine_options.h"
#include "storage/tensor.h"

namespace ember::train::testing {

std::unique_ptr<engine::Engine> MakeEngine() {
  return engine::CreateEngine(engine::EngineOptions{});
}

std::string TempPath(std::string_view name) {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string path = ::testing::TempDir();
  if (!path.empty() && path.back() != '/') path += '/';
  path += "ember_train_";
  if (info != nullptr) {
    path += info->test_suite_name();
    path += '.';
    path += info->name();
    path += '_';
  }
  path += std::to_string(::getpid());
  path += '_';
  path += name;
  return path;
}

std::string WriteTempFile(std::string_view name, std::string_view content) {
  const std::string path = TempPath(name);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  EXPECT_TRUE(out.good()) << "cannot write " << path;
  return path;
}

std::vector<Example> Unpack(const HostBatch& batch, const DataSpec& spec) {
  const int64_t b_size = batch.batch_size;
  const int num_tables = spec.num_tables();
  const int num_dense = spec.num_dense;
  EXPECT_EQ(batch.dense.shape(), (std::vector<int64_t>{b_size, num_dense}));
  EXPECT_EQ(batch.labels.shape(), (std::vector<int64_t>{b_size}));
  EXPECT_EQ(batch.offsets.shape(), (std::vector<int64_t>{num_tables * b_size + 1}));
  batch.dense.WaitToRead();
  batch.labels.WaitToRead();
  batch.offsets.WaitToRead();
  batch.indices.WaitToRead();
  const float* dense = batch.dense.data<float>();
  const float* labels = batch.labels.data<float>();
  const int64_t* offsets = batch.offsets.data<int64_t>();
  const int64_t* indices = batch.indices.data<int64_t>();
  EXPECT_EQ(offsets[0], 0);
  EXPECT_EQ(offsets[num_tables * b_size], batch.indices.numel());
  std::vector<Example> out(static_cast<size_t>(b_size));
  for (int64_t b = 0; b < b_size; ++b) {
    Example& e = out[static_cast<size_t>(b)];
    e.label = labels[b];
    e.dense.assign(dense + b * num_dense, dense + (b + 1) * num_dense);
    e.bags.resize(static_cast<size_t>(num_tables));
    for (int t = 0; t < num_tables; ++t) {
      const int64_t lo = offsets[t * b_size + b], hi = offsets[t * b_size + b + 1];
      EXPECT_LE(lo, hi);
      for (int64_t i = lo; i < hi; ++i) {
        EXPECT_GE(indices[i], 0);
        EXPECT_LT(indices[i], spec.rows[static_cast<size_t>(t)]);
        e.bags[static_cast<size_t>(t)].push_back(indices[i]);
      }
    }
  }
  return out;
}

std::vector<HostBatch> ReadAll(BatchSource& source, const BatchMemory& memory) {
  std::vector<HostBatch> batches;
  while (auto batch = source.Next(memory)) batches.push_back(std::move(*batch));
  return batches;
}

std::vector<Example> ReadExamples(BatchSource& source, const BatchMemory& memory) {
  std::vector<Example> out;
  while (auto batch = source.Next(memory)) {
    for (Example& e : Unpack(*batch, source.spec())) out.push_back(std::move(e));
  }
  return out;
}

std::vector<uint8_t> Bytes(const HostBatch& batch) {
  std::vector<uint8_t> out;
  for (const storage::Tensor* t : {&batch.dense, &batch.labels, &batch.offsets, &batch.indices}) {
    t->WaitToRead();
    const auto* p = static_cast<const uint8_t*>(t->data());
    out.insert(out.end(), p, p + t->bytes());
  }
  return out;
}

}  // namespace ember::train::testing
