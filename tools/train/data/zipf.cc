#include "tools/train/data/zipf.h"

#include <cmath>
#include <cstdint>

#include <absl/strings/str_cat.h>

#include "engine/error.h"

namespace ember::train {
namespace {

// log1p(x) / x, continuous at 0.
double Helper1(double x) {
  if (std::abs(x) > 1e-8) return std::log1p(x) / x;
  return 1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x));
}

// expm1(x) / x, continuous at 0.
double Helper2(double x) {
  if (std::abs(x) > 1e-8) return std::expm1(x) / x;
  return 1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + 0.25 * x));
}

}  // namespace

ZipfSampler::ZipfSampler(int64_t n, double alpha) : n_(n), alpha_(alpha) {
  if (n < 1) throw InvalidArgument(absl::StrCat("[ZipfSampler] n = ", n, " is not positive"));
  if (!(alpha >= 0.0) || !std::isfinite(alpha)) {
    throw InvalidArgument(
        absl::StrCat("[ZipfSampler] alpha = ", alpha, " is not a finite number >= 0"));
  }
  h_integral_x1_ = HIntegral(1.5) - 1.0;
  h_integral_n_ = HIntegral(static_cast<double>(n) + 0.5);
  s_ = 2.0 - HIntegralInverse(HIntegral(2.5) - H(2.0));
  if (alpha == 0.0) return;  // uniform: no table
  const int64_t head = n < kHeadRanks ? n : kHeadRanks;
  bound_.assign(static_cast<size_t>(head) + 1, 0.0);
  accept_.assign(static_cast<size_t>(head) + 1, 0.0);
  bound_[0] = h_integral_x1_;
  for (int64_t k = 1; k <= head; ++k) {
    bound_[static_cast<size_t>(k)] = HIntegral(static_cast<double>(k) + 0.5);
    accept_[static_cast<size_t>(k)] = bound_[static_cast<size_t>(k)] - H(static_cast<double>(k));
  }
  // The last rank's cell ends at h_integral_n_ itself.
  if (head == n) bound_[static_cast<size_t>(head)] = h_integral_n_;
  head_bound_ = bound_[static_cast<size_t>(head)];
  const int64_t buckets = 2 * head;
  guide_scale_ = static_cast<double>(buckets) / (head_bound_ - h_integral_x1_);
  guide_.resize(static_cast<size_t>(buckets));
  int64_t k = 1;
  for (int64_t g = 0; g < buckets; ++g) {
    const double start = h_integral_x1_ + static_cast<double>(g) / guide_scale_;
    while (k < head && bound_[static_cast<size_t>(k)] < start) ++k;
    guide_[static_cast<size_t>(g)] = static_cast<int32_t>(k);
  }
}

double ZipfSampler::H(double x) const { return std::exp(-alpha_ * std::log(x)); }

double ZipfSampler::HIntegral(double x) const {
  const double log_x = std::log(x);
  return Helper2((1.0 - alpha_) * log_x) * log_x;
}

double ZipfSampler::HIntegralInverse(double x) const {
  double t = x * (1.0 - alpha_);
  if (t < -1.0) t = -1.0;  // rounding near the end of the support
  return std::exp(Helper1(t) * x);
}

double ZipfSampler::Probability(int64_t k) const {
  if (k < 0 || k >= n_) return 0.0;
  double norm = 0.0;
  for (int64_t i = n_; i >= 1; --i) norm += H(static_cast<double>(i));
  return H(static_cast<double>(k + 1)) / norm;
}

}  // namespace ember::train
