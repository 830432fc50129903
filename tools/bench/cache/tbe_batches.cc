#include "tools/bench/cache/tbe_batches.h"

#include <cstring>
#include <span>
#include <thread>

#include "storage/memory.h"

namespace ember::bench::cache_bench {
namespace {

// `values` as an i32 tensor on `ctx`; through pinned memory to a GPU.
storage::Tensor UploadI32(engine::Engine& engine, const std::vector<int32_t>& values,
                          engine::Context ctx) {
  const auto n = static_cast<int64_t>(values.size());
  storage::Tensor host = storage::Tensor::Empty(
      engine, {n}, storage::DType::kI32, engine::Context::CPU(),
      ctx.is_gpu() ? storage::MemoryKind::kPinned : storage::MemoryKind::kCpu);
  host.WaitToWrite();
  std::memcpy(host.data(), values.data(), values.size() * sizeof(int32_t));
  if (!ctx.is_gpu()) return host;
  storage::Tensor device = storage::Tensor::Empty(engine, {n}, storage::DType::kI32, ctx);
  host.CopyTo(device);
  return device;  // `host` is deleted after the copy has run
}

}  // namespace

HostBatch MakeBatch(const CacheShape& shape, const ZipfRows& zipf, uint64_t seed, uint64_t number) {
  HostBatch batch;
  batch.tables = shape.tables;
  batch.batch_size = shape.batch;
  const int64_t per_table = shape.batch * shape.pooling;
  batch.indices.resize(static_cast<std::size_t>(per_table * shape.tables));
  // A thread per table: the draws read the alias table at random, which for
  // tens of millions of rows is a cache miss each.
  std::vector<std::thread> threads;
  for (int t = 0; t < shape.tables; ++t) {
    threads.emplace_back([&, t] {
      std::vector<int64_t> rows(static_cast<std::size_t>(per_table));
      zipf.Draw(seed, number * 1024 + static_cast<uint64_t>(t), rows, /*salt=*/t * 7919u);
      for (int64_t i = 0; i < per_table; ++i) {
        batch.indices[t * per_table + i] = static_cast<int32_t>(rows[i]);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  batch.offsets.resize(static_cast<std::size_t>(shape.tables * shape.batch + 1));
  for (std::size_t i = 0; i < batch.offsets.size(); ++i) {
    batch.offsets[i] = static_cast<int32_t>(i * shape.pooling);
  }
  return batch;
}

std::vector<int64_t> LinearRows(const HostBatch& batch, int64_t rows) {
  const auto per_table = static_cast<int64_t>(batch.indices.size()) / batch.tables;
  std::vector<int64_t> linear(batch.indices.size());
  for (std::size_t i = 0; i < linear.size(); ++i) {
    linear[i] = static_cast<int64_t>(i) / per_table * rows + batch.indices[i];
  }
  return DistinctRows(std::move(linear));
}

BatchTensors Upload(engine::Engine& engine, const HostBatch& batch, engine::Context ctx) {
  return {UploadI32(engine, batch.indices, ctx), UploadI32(engine, batch.offsets, ctx),
          batch.batch_size};
}

}  // namespace ember::bench::cache_bench
