#include "tests/cache/cache_test_util.h"

#include <algorithm>

namespace ember::cache::testing {

template <typename T>
Tensor FromHost(engine::Engine& engine, engine::Context ctx, const std::vector<T>& values,
                std::vector<int64_t> shape) {
  if (shape.empty()) shape = {static_cast<int64_t>(values.size())};
  Tensor host = Tensor::Empty(engine, shape, storage::kDTypeOf<T>, engine::Context::CPU());
  host.WaitToWrite();
  std::copy(values.begin(), values.end(), host.data<T>());
  if (!ctx.is_gpu()) return host;
  Tensor on_ctx = Tensor::Empty(engine, shape, storage::kDTypeOf<T>, ctx);
  host.CopyTo(on_ctx);
  return on_ctx;
}

template <typename T>
std::vector<T> ToHost(const Tensor& tensor) {
  if (tensor.ctx().is_gpu()) {
    Tensor host =
        Tensor::Empty(tensor.engine(), tensor.shape(), tensor.dtype(), engine::Context::CPU());
    tensor.CopyTo(host);
    return ToHost<T>(host);
  }
  tensor.WaitToRead();
  const T* data = tensor.data<T>();
  return std::vector<T>(data, data + tensor.numel());
}

FlatBags Flatten(const std::vector<std::vector<int64_t>>& bags) {
  FlatBags flat{.offsets = {0}};
  for (const std::vector<int64_t>& bag : bags) {
    flat.indices.insert(flat.indices.end(), bag.begin(), bag.end());
    flat.offsets.push_back(static_cast<int64_t>(flat.indices.size()));
  }
  return flat;
}

Batch MakeBatch(engine::Engine& engine, engine::Context ctx, int num_tables, int64_t batch_size,
                const std::vector<std::vector<int64_t>>& bags) {
  std::vector<std::vector<int64_t>> all = bags;
  all.resize(static_cast<std::size_t>(num_tables * batch_size));
  const FlatBags flat = Flatten(all);
  return Batch{FromHost(engine, ctx, flat.indices), FromHost(engine, ctx, flat.offsets),
               batch_size};
}

template Tensor FromHost<float>(engine::Engine&, engine::Context, const std::vector<float>&,
                                std::vector<int64_t>);
template Tensor FromHost<int64_t>(engine::Engine&, engine::Context, const std::vector<int64_t>&,
                                  std::vector<int64_t>);
template Tensor FromHost<int32_t>(engine::Engine&, engine::Context, const std::vector<int32_t>&,
                                  std::vector<int64_t>);
template std::vector<float> ToHost<float>(const Tensor&);
template std::vector<int64_t> ToHost<int64_t>(const Tensor&);
template std::vector<int32_t> ToHost<int32_t>(const Tensor&);

}  // namespace ember::cache::testing
