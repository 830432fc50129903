#include "tools/train/model_state.h"

#include <bit>
#include <cmath>
#include <cstdint>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace ember::train {

std::vector<float> ReadFloats(const storage::Tensor& tensor) {
  storage::Tensor host;
  if (tensor.kind() == storage::MemoryKind::kDevice) {  // not host-addressable
    host = storage::Tensor::Empty(tensor.engine(), tensor.shape(), tensor.dtype(),
                                  engine::Context::CPU());
    tensor.CopyTo(host);
  }
  const storage::Tensor& readable = host ? host : tensor;
  readable.WaitToRead();
  const float* data = readable.data<float>();
  return {data, data + readable.numel()};
}

ModelState ReadModelState(DlrmModel& model) {
  model.tbe().Flush();
  ModelState state;
  auto read = [&](const std::string& name, storage::Tensor& tensor) {
    state[name] = ReadFloats(tensor);
  };
  model.ForEachDenseState(read);
  read("tables.weights", model.tbe().home());
  model.ForEachTableState(read);
  return state;
}

StateDifference CompareStates(const ModelState& a, const ModelState& b) {
  StateDifference d;
  for (const auto& [name, values] : b) {
    if (!a.contains(name)) d.unmatched.push_back(name);
  }
  for (const auto& [name, x] : a) {
    const auto other = b.find(name);
    if (other == b.end() || other->second.size() != x.size()) {
      d.unmatched.push_back(name);
      continue;
    }
    ++d.sections;
    const std::vector<float>& y = other->second;
    for (size_t i = 0; i < x.size(); ++i) {
      ++d.values;
      if (std::bit_cast<uint32_t>(x[i]) == std::bit_cast<uint32_t>(y[i])) continue;
      ++d.values_differ;
      const double gap = std::fabs(static_cast<double>(x[i]) - static_cast<double>(y[i]));
      if (!(gap <= d.largest)) {  // NaN counts as the largest
        d.largest = gap;
        d.largest_in = name;
      }
    }
  }
  return d;
}

std::string StateDifference::Describe() const {
  if (identical()) {
    return fmt::format("identical: {} sections, {} values bit for bit", sections, values);
  }
  std::string text = fmt::format("{} of {} values differ", values_differ, values);
  if (values_differ > 0) {
    text += fmt::format(", the largest by {:.3g} (in {})", largest, largest_in);
  }
  if (!unmatched.empty()) {
    text += fmt::format("; not in both or of two sizes: {}", fmt::join(unmatched, ", "));
  }
  return text;
}

}  // namespace ember::train
