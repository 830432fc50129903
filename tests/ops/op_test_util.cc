#include "tests/ops/op_test_util.h"

#include <cmath>
#include <cstring>

#include "engine/base/device.h"
#include "storage/half.h"

namespace ember::ops::testing {
namespace {

template <typename T>
std::vector<uint8_t> Encode(const std::vector<T>& values, DType dtype) {
  std::vector<uint8_t> bytes(values.size() * storage::SizeOf(dtype));
  for (std::size_t i = 0; i < values.size(); ++i) {
    uint8_t* at = bytes.data() + i * storage::SizeOf(dtype);
    const double v = static_cast<double>(values[i]);
    switch (dtype) {
      case DType::kF32: {
        const float f = static_cast<float>(v);
        std::memcpy(at, &f, 4);
        break;
      }
      case DType::kF16: {
        const uint16_t h = storage::FloatToHalf(static_cast<float>(v));
        std::memcpy(at, &h, 2);
        break;
      }
      case DType::kBF16: {
        const uint16_t h = storage::FloatToBf16(static_cast<float>(v));
        std::memcpy(at, &h, 2);
        break;
      }
      case DType::kI32: {
        const auto x = static_cast<int32_t>(values[i]);
        std::memcpy(at, &x, 4);
        break;
      }
      case DType::kI64: {
        const auto x = static_cast<int64_t>(values[i]);
        std::memcpy(at, &x, 8);
        break;
      }
    }
  }
  return bytes;
}

template <typename T>
T Decode(const uint8_t* at, DType dtype) {
  switch (dtype) {
    case DType::kF32: {
      float f;
      std::memcpy(&f, at, 4);
      return static_cast<T>(f);
    }
    case DType::kF16: {
      uint16_t h;
      std::memcpy(&h, at, 2);
      return static_cast<T>(storage::HalfToFloat(h));
    }
    case DType::kBF16: {
      uint16_t h;
      std::memcpy(&h, at, 2);
      return static_cast<T>(storage::Bf16ToFloat(h));
    }
    case DType::kI32: {
      int32_t x;
      std::memcpy(&x, at, 4);
      return static_cast<T>(x);
    }
    case DType::kI64: {
      int64_t x;
      std::memcpy(&x, at, 8);
      return static_cast<T>(x);
    }
  }
  return T{};
}

}  // namespace

std::vector<std::string> EngineNames() {
  return {"NaiveEngine",      "ThreadedEngine",      "ThreadedEnginePerDevice",
          "NaiveEngineAsync", "ThreadedEngineAsync", "ThreadedEnginePerDeviceAsync"};
}

std::unique_ptr<engine::Engine> MakeEngine(const std::string& name) {
  return engine::CreateEngine(engine::ParseEngineType(name));
}

bool HaveGpu() { return ember::GpuCount() > 0; }

template <typename T>
Tensor FromHost(engine::Engine& engine, const std::vector<T>& values, std::vector<int64_t> shape,
                engine::Context ctx, DType dtype) {
  Tensor host = Tensor::Empty(engine, shape, dtype, engine::Context::CPU());
  const std::vector<uint8_t> bytes = Encode(values, dtype);
  EXPECT_EQ(bytes.size(), host.bytes()) << "values do not fill the shape";
  host.WaitToWrite();
  if (!bytes.empty()) std::memcpy(host.data(), bytes.data(), std::min(bytes.size(), host.bytes()));
  if (!ctx.is_gpu()) return host;
  Tensor device = Tensor::Empty(engine, std::move(shape), dtype, ctx);
  host.CopyTo(device);
  return device;
}

template <typename T>
std::vector<T> ToHost(const Tensor& tensor) {
  // The wait on the tensor itself comes first: it reports an error the op
  // that wrote it left for later (a GPU op's deferred check, engine.h),
  // which the GPU copy below, reading the tensor, would not pass on.
  tensor.WaitToRead();
  const Tensor* source = &tensor;
  Tensor host;
  if (tensor.ctx().is_gpu()) {
    host = Tensor::Empty(tensor.engine(), tensor.shape(), tensor.dtype(), engine::Context::CPU());
    tensor.CopyTo(host);
    source = &host;
  }
  source->WaitToRead();
  std::vector<T> values(static_cast<std::size_t>(source->numel()));
  const auto* bytes = static_cast<const uint8_t*>(source->data());
  for (std::size_t i = 0; i < values.size(); ++i) {
    values[i] = Decode<T>(bytes + i * storage::SizeOf(source->dtype()), source->dtype());
  }
  return values;
}

template Tensor FromHost(engine::Engine&, const std::vector<float>&, std::vector<int64_t>,
                         engine::Context, DType);
template Tensor FromHost(engine::Engine&, const std::vector<double>&, std::vector<int64_t>,
                         engine::Context, DType);
template Tensor FromHost(engine::Engine&, const std::vector<int32_t>&, std::vector<int64_t>,
                         engine::Context, DType);
template Tensor FromHost(engine::Engine&, const std::vector<int64_t>&, std::vector<int64_t>,
                         engine::Context, DType);
template std::vector<float> ToHost(const Tensor&);
template std::vector<double> ToHost(const Tensor&);
template std::vector<int32_t> ToHost(const Tensor&);
template std::vector<int64_t> ToHost(const Tensor&);

std::vector<float> RandomFloats(std::mt19937_64& rng, std::size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> values(n);
  for (float& v : values) v = dist(rng);
  return values;
}

void ExpectClose(const std::vector<float>& actual, const std::vector<double>& expected, double rtol,
                 double atol, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  int reported = 0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double error = std::fabs(static_cast<double>(actual[i]) - expected[i]);
    const bool ok = error <= atol + rtol * std::fabs(expected[i]) && !std::isnan(actual[i]);
    if (!ok && reported++ < 5) {
      ADD_FAILURE() << what << ": element " << i << " is " << actual[i] << ", expected "
                    << expected[i] << " (error " << error << ", allowed "
                    << atol + rtol * std::fabs(expected[i]) << ")";
    }
  }
}

}  // namespace ember::ops::testing
