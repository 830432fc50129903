#pragma once

// What the dense op examples share: where to run (GPU 0 if there is one,
// else the CPU), f32 tensors to and from host vectors (through the engine,
// so GPU tensors work alike), and the max error against a reference.

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "engine/base/device.h"
#include "engine/engine.h"
#include "storage/tensor.h"

namespace ember::examples {

using engine::Context;
using storage::DType;
using storage::Tensor;

inline Context ExampleContext() { return ember::GpuCount() > 0 ? Context::GPU(0) : Context::CPU(); }

// An f32 tensor on `ctx` holding `values`, staged through a host tensor.
inline Tensor Upload(engine::Engine& engine, const std::vector<float>& values,
                     std::vector<int64_t> shape, Context ctx) {
  Tensor host = Tensor::Empty(engine, shape, DType::kF32, Context::CPU());
  host.WaitToWrite();
  std::memcpy(host.data(), values.data(), host.bytes());
  if (!ctx.is_gpu()) return host;
  Tensor device = Tensor::Empty(engine, std::move(shape), DType::kF32, ctx);
  host.CopyTo(device);
  return device;
}

// The tensor's values; waits for the ops that write it.
inline std::vector<float> Download(const Tensor& tensor) {
  Tensor host = Tensor::Empty(tensor.engine(), tensor.shape(), DType::kF32, Context::CPU());
  tensor.CopyTo(host);
  host.WaitToRead();
  std::vector<float> values(static_cast<std::size_t>(host.numel()));
  std::memcpy(values.data(), host.data(), host.bytes());
  return values;
}

inline double MaxError(const std::vector<float>& got, const std::vector<double>& expected) {
  double error = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    error = std::fmax(error, std::fabs(got[i] - expected[i]));
  }
  return error;
}

// Prints "<what>: max error E (limit L): OK" and returns whether E <= L.
inline bool Report(const char* what, double error, double limit) {
  const bool ok = error <= limit;
  std::printf("%s: max error %.2e (limit %.0e): %s\n", what, error, limit, ok ? "OK" : "MISMATCH");
  return ok;
}

}  // namespace ember::examples
