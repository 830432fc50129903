// One training step of the DLRM model against a double-precision reference
// of its math (model_config.h), written out here on tiny shapes: the
// bottom MLP, the embedding bags, the pairwise dots, the top MLP, the
// sigmoid and binary cross-entropy, the backward through all of them and
// each optimizer's update, on fresh random data (the seed is printed).
//
// Tolerance: the model computes in f32 with a few terms per sum, so
// 1e-4 relative plus 1e-5 absolute. Adagrad's and Adam's first step moves a
// weight by about lr * sign(g) (lr * g / (|g| + eps)), which f32 rounding
// of a gradient near zero can flip: weights whose reference gradient is
// below 1e-4 in magnitude are not compared for those two.

#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "tests/train/train_test_util.h"
#include "tools/train/data/synthetic_source.h"
#include "tools/train/trainer.h"

namespace ember::train::testing {
namespace {

using Vec = std::vector<double>;

struct Batch {
  int64_t size = 0;
  std::vector<float> dense, labels;
  std::vector<int64_t> indices, offsets;
};

Batch Unpack(const HostBatch& h) {
  Batch b;
  b.size = h.batch_size;
  b.dense.assign(h.dense.data<float>(), h.dense.data<float>() + h.dense.numel());
  b.labels.assign(h.labels.data<float>(), h.labels.data<float>() + h.labels.numel());
  b.indices.assign(h.indices.data<int64_t>(), h.indices.data<int64_t>() + h.indices.numel());
  b.offsets.assign(h.offsets.data<int64_t>(), h.offsets.data<int64_t>() + h.offsets.numel());
  return b;
}

Vec ToDouble(const std::vector<float>& v) { return Vec(v.begin(), v.end()); }

// An MLP in double: per layer y = relu?(x W^T + b), with its backward.
struct RefMlp {
  std::vector<int64_t> sizes;
  bool relu_last;
  std::vector<Vec> w, b, dw, db, out;

  bool Relu(std::size_t l) const { return l + 1 < w.size() || relu_last; }

  Vec Forward(const Vec& x, int64_t batch) {
    out.clear();
    const Vec* in = &x;
    for (std::size_t l = 0; l < w.size(); ++l) {
      const int64_t n_in = sizes[l], n_out = sizes[l + 1];
      Vec y(batch * n_out);
      for (int64_t r = 0; r < batch; ++r) {
        for (int64_t o = 0; o < n_out; ++o) {
          double sum = b[l][o];
          for (int64_t i = 0; i < n_in; ++i) sum += (*in)[r * n_in + i] * w[l][o * n_in + i];
          y[r * n_out + o] = Relu(l) ? std::max(sum, 0.0) : sum;
        }
      }
      out.push_back(std::move(y));
      in = &out.back();
    }
    return out.back();
  }

  // Returns dL/dx; fills dw, db.
  Vec Backward(const Vec& x, Vec dy, int64_t batch) {
    dw.assign(w.size(), {});
    db.assign(w.size(), {});
    for (std::size_t l = w.size(); l-- > 0;) {
      const int64_t n_in = sizes[l], n_out = sizes[l + 1];
      if (Relu(l)) {
        for (std::size_t k = 0; k < dy.size(); ++k) dy[k] = out[l][k] > 0 ? dy[k] : 0.0;
      }
      const Vec& in = l == 0 ? x : out[l - 1];
      dw[l].assign(n_out * n_in, 0.0);
      db[l].assign(n_out, 0.0);
      Vec dx(batch * n_in, 0.0);
      for (int64_t r = 0; r < batch; ++r) {
        for (int64_t o = 0; o < n_out; ++o) {
          const double g = dy[r * n_out + o];
          db[l][o] += g;
          for (int64_t i = 0; i < n_in; ++i) {
            dw[l][o * n_in + i] += g * in[r * n_in + i];
            dx[r * n_in + i] += g * w[l][o * n_in + i];
          }
        }
      }
      dy = std::move(dx);
    }
    return dy;
  }
};

RefMlp LoadMlp(std::map<std::string, std::vector<float>>& weights, const std::string& name,
               std::vector<int64_t> sizes, bool relu_last) {
  RefMlp m{std::move(sizes), relu_last, {}, {}, {}, {}, {}};
  for (std::size_t l = 0; l + 1 < m.sizes.size(); ++l) {
    m.w.push_back(ToDouble(weights.at(name + "." + std::to_string(l) + ".weight")));
    m.b.push_back(ToDouble(weights.at(name + "." + std::to_string(l) + ".bias")));
  }
  return m;
}

struct Expected {
  double loss = 0.0;
  std::map<std::string, Vec> weights;
  std::map<std::string, Vec> grads;  // of the step, per weight
};

// The reference step from the initial weights `w0` on `batch`.
Expected ReferenceStep(const ModelConfig& cfg, std::map<std::string, std::vector<float>> w0,
                       const Batch& batch) {
  const int64_t B = batch.size, T = cfg.num_tables(), D = cfg.embedding_dim;
  const int64_t F = T + 1, P = cfg.interaction_pairs();
  const ops::TbeTables tables = cfg.tables();
  RefMlp bottom = LoadMlp(w0, "bottom", cfg.bottom_sizes(), true);
  RefMlp top = LoadMlp(w0, "top", cfg.top_sizes(), false);
  Vec emb = ToDouble(w0.at("tables.weights"));

  // Forward.
  const Vec x = ToDouble(batch.dense);
  const Vec z = bottom.Forward(x, B);
  Vec inter(B * F * D);  // [z, pooled] per example
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t e = 0; e < D; ++e) inter[b * F * D + e] = z[b * D + e];
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t i = batch.offsets[t * B + b]; i < batch.offsets[t * B + b + 1]; ++i) {
        const int64_t at = tables.weight_offset(static_cast<int>(t)) + batch.indices[i] * D;
        for (int64_t e = 0; e < D; ++e) inter[(b * F + t + 1) * D + e] += emb[at + e];
      }
    }
  }
  auto pair = [](int64_t i, int64_t j) { return i * (i - 1) / 2 + j; };
  Vec top_in(B * (D + P));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t e = 0; e < D; ++e) top_in[b * (D + P) + e] = z[b * D + e];
    for (int64_t i = 1; i < F; ++i) {
      for (int64_t j = 0; j < i; ++j) {
        double dot = 0;
        for (int64_t e = 0; e < D; ++e)
          dot += inter[(b * F + i) * D + e] * inter[(b * F + j) * D + e];
        top_in[b * (D + P) + D + pair(i, j)] = dot;
      }
    }
  }
  const Vec logits = top.Forward(top_in, B);
  Expected out;
  Vec dlogits(B);
  for (int64_t b = 0; b < B; ++b) {
    const double l = logits[b], y = batch.labels[b];
    out.loss += (std::max(l, 0.0) - l * y + std::log1p(std::exp(-std::abs(l)))) / B;
    dlogits[b] = (1.0 / (1.0 + std::exp(-l)) - y) / B;
  }

  // Backward.
  const Vec dtop_in = top.Backward(top_in, dlogits, B);
  Vec dz(B * D), dpooled(B * T * D);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t k = 0; k < F; ++k) {
      for (int64_t e = 0; e < D; ++e) {
        double g = k == 0 ? dtop_in[b * (D + P) + e] : 0.0;
        for (int64_t m = 0; m < F; ++m) {
          if (m == k) continue;
          const double dZ = dtop_in[b * (D + P) + D + (m > k ? pair(m, k) : pair(k, m))];
          g += dZ * inter[(b * F + m) * D + e];
        }
        if (k == 0) {
          dz[b * D + e] = g;
        } else {
          dpooled[(b * T + k - 1) * D + e] = g;
        }
      }
    }
  }
  bottom.Backward(x, dz, B);
  // Per distinct row, the sum of its occurrences' gradients.
  std::map<int64_t, Vec> row_grad;  // by first element of the row
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t i = batch.offsets[t * B + b]; i < batch.offsets[t * B + b + 1]; ++i) {
        const int64_t at = tables.weight_offset(static_cast<int>(t)) + batch.indices[i] * D;
        Vec& g = row_grad[at];
        g.resize(D, 0.0);
        for (int64_t e = 0; e < D; ++e) g[e] += dpooled[(b * T + t) * D + e];
      }
    }
  }

  // Updates: the first step, so every optimizer state starts at zero and
  // Adam's t is 1.
  const OptimizerConfig& o = cfg.optimizer;
  // The new value of p from its gradient g (ss: g's square, or the row's
  // mean square for row-wise Adagrad).
  auto updated = [&](double p, double g, double ss, double lr) {
    switch (o.kind) {
      case Optimizer::kSgd:
        return p - lr * g;
      case Optimizer::kAdagrad:
        return p - lr * g / (std::sqrt(ss) + o.eps);
      case Optimizer::kAdam: {
        const double m = (1 - o.beta1) * g, v = (1 - o.beta2) * g * g;
        return p - lr * (m / (1 - o.beta1)) / (std::sqrt(v / (1 - o.beta2)) + o.eps);
      }
    }
    return p;
  };
  for (RefMlp* mlp : {&bottom, &top}) {
    const std::string name = mlp == &bottom ? "bottom" : "top";
    for (std::size_t l = 0; l < mlp->w.size(); ++l) {
      for (auto [kind, p, g] : {std::tuple{"weight", &mlp->w[l], &mlp->dw[l]},
                                std::tuple{"bias", &mlp->b[l], &mlp->db[l]}}) {
        for (std::size_t k = 0; k < p->size(); ++k) {
          (*p)[k] = updated((*p)[k], (*g)[k], (*g)[k] * (*g)[k], o.dense_lr);
        }
        const std::string key = name + "." + std::to_string(l) + "." + kind;
        out.weights[key] = *p;
        out.grads[key] = *g;
      }
    }
  }
  Vec emb_grad(emb.size(), 0.0);
  for (auto& [at, g] : row_grad) {
    double mean_sq = 0;
    for (double v : g) mean_sq += v * v / static_cast<double>(D);
    for (int64_t e = 0; e < D; ++e) {
      emb[at + e] = updated(emb[at + e], g[e], mean_sq, o.embedding_lr);
      emb_grad[at + e] = g[e];
    }
  }
  out.grads["tables.weights"] = emb_grad;
  out.weights["tables.weights"] = emb;
  return out;
}

class DlrmStepTest : public ::testing::TestWithParam<Optimizer> {};

TEST_P(DlrmStepTest, OneStepMatchesTheDoublePrecisionReference) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "data seed " << seed);
  ModelConfig cfg;
  cfg.num_dense = 3;
  cfg.bottom_mlp = {5};
  cfg.table_rows = {6, 9};
  cfg.embedding_dim = 3;
  cfg.top_mlp = {4};
  cfg.optimizer.kind = GetParam();
  cfg.optimizer.dense_lr = cfg.optimizer.embedding_lr = 0.05f;
  cfg.seed = seed;
  const SyntheticOptions data = TinyData(cfg, /*batch=*/5, /*examples=*/5, seed);

  auto engine = NewEngine("ThreadedEnginePerDevice");
  TrainOptions options = TinyOptions(cfg, Schedule::kBaseline, 1);
  std::map<std::string, std::vector<float>> initial;
  {
    DlrmModel fresh(*engine, cfg, options.placement);
    fresh.Initialize();
    initial = ReadWeights(fresh);
  }
  SyntheticSource source(data);
  const Batch batch = Unpack(*source.Next({engine.get(), storage::MemoryKind::kCpu}));
  const Expected expected = ReferenceStep(cfg, initial, batch);

  Trainer trainer(*engine, options, std::make_unique<SyntheticSource>(data), nullptr);
  const TrainResult result = trainer.Run();
  ASSERT_EQ(result.records.size(), 1u);
  EXPECT_NEAR(result.records[0].loss, expected.loss, 1e-5 + 1e-4 * std::abs(expected.loss));

  std::map<std::string, std::vector<float>> trained = ReadWeights(trainer.model());
  for (const auto& [name, want] : expected.weights) {
    SCOPED_TRACE(name);
    const std::vector<float>& got = trained.at(name);
    ASSERT_EQ(got.size(), want.size());
    int bad = 0;
    for (std::size_t k = 0; k < want.size() && bad < 5; ++k) {
      double tol = 1e-5 + 1e-4 * std::abs(want[k]);
      // Adagrad's and Adam's first step is about lr * sign(g): where f32
      // rounding can flip a tiny g, the step is not compared.
      if (GetParam() != Optimizer::kSgd && std::abs(expected.grads.at(name)[k]) < 1e-4) {
        tol = 2.0 * cfg.optimizer.dense_lr;
      }
      if (std::abs(got[k] - want[k]) > tol) {
        ADD_FAILURE() << name << "[" << k << "] = " << got[k] << ", expected " << want[k]
                      << " (initial " << initial.at(name)[k] << ")";
        ++bad;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Train, DlrmStepTest,
                         ::testing::Values(Optimizer::kSgd, Optimizer::kAdagrad, Optimizer::kAdam),
                         [](const auto& info) { return std::string(ToString(info.param)); });

}  // namespace
}  // namespace ember::train::testing
