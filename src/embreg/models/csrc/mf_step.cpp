// Fused CPU training step of biased matrix factorisation with sparse tables (float32).
//
// Paper: sse-stochastic-shared-embeddings.txt, Sec. 4.1 (biased MF, squared loss). One call does what the
// autograd step of embreg/models/mf.py (BiasedMF.forward + loss, dropout 0) followed by the optimizer step does,
// for a model whose user and item tables are nn.Embedding(sparse=True) and whose bias tables are dense:
//
//   r_hat_b = mu + bu[u_b] + bi[i_b] + <P[u_b], Q[i_b]>,   e_b = r_hat_b - r_b
//   loss    = (1/B) sum_b e_b^2 + l2 (1/B) sum_b (|P[u_b]|^2 + |Q[i_b]|^2 + bu[u_b]^2 + bi[i_b]^2)
//   dloss/dP[u] = sum_{b: u_b = u} (2/B) (e_b Q[i_b] + l2 P[u])      (and symmetrically for Q, bu, bi)
//
// then the update of the optimizer the step replaces:
//
//   * "adam" (embreg.optim.lazy_adam.LazyAdam): lazy Adam on the batch's distinct rows of P and Q (the rows'
//     moments only; SparseAdam's arithmetic, lr sqrt(1 - b2^t) / (1 - b1^t) m / (sqrt(v) + eps)), and dense Adam
//     on every row of the bias vectors (torch.optim.Adam's arithmetic: lr / (1 - b1^t) m / (sqrt(v) /
//     sqrt(1 - b2^t) + eps), rows outside the batch with gradient 0), each parameter with its own step count;
//   * "sgd" (torch.optim.SGD without momentum or weight decay): p -= lr g on the rows with a gradient.
//
// Two passes: (1) over the batch, each example's error, the loss and, in a packed scratch buffer, each distinct
// row's summed gradient (distinct rows are found through a slot map kept by the caller: row -> slot, -1 = absent,
// reset before returning; the table rows of later examples are prefetched); nothing is written to a parameter
// when the loss is not finite, so the caller can stop with the parameters of the previous step; (2) the
// optimizer update of those rows (their parameter and moment rows prefetched ahead) and of the bias vectors.
// Pass (1) is single-threaded (rows are found and summed in batch order); the updates of (2) touch distinct rows
// and run on torch's intra-op threads (at::parallel_for), with the same result for any thread count. Gradients
// are summed in another order than autograd's, so results equal the autograd step up to float rounding.

#include <ATen/Parallel.h>
#include <torch/extension.h>

#include "embreg_errors.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace {

inline float dot(const float* a, const float* b, int64_t d) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int64_t c = 0; c < d; ++c) s += a[c] * b[c];
  return s;
}

inline float squared_norm(const float* a, int64_t d) { return dot(a, a, d); }

// y += alpha x + beta z
inline void axpbz(float* y, float alpha, const float* x, float beta, const float* z, int64_t d) {
#pragma omp simd
  for (int64_t c = 0; c < d; ++c) y[c] += alpha * x[c] + beta * z[c];
}

void check_table(const at::Tensor& t, const char* name, int64_t cols) {
  EMBREG_CHECK(t.device().is_cpu() && t.scalar_type() == at::kFloat && t.is_contiguous() && t.dim() == 2,
               "embreg MF step: ", name, " must be a contiguous 2-d float32 CPU tensor, got ", t.scalar_type(), " ",
               t.sizes(), " on ", t.device());
  EMBREG_CHECK(cols < 0 || t.size(1) == cols, "embreg MF step: ", name, " must have ", cols, " columns, got ",
               t.size(1));
}

void check_like(const at::Tensor& t, const at::Tensor& like, const char* name) {
  EMBREG_CHECK(t.device().is_cpu() && t.scalar_type() == at::kFloat && t.is_contiguous() && t.sizes() == like.sizes(),
               "embreg MF step: optimizer state ", name, " must be a contiguous float32 CPU tensor of shape ",
               like.sizes(), ", got ", t.scalar_type(), " ", t.sizes());
}

// The distinct rows of one table in a batch, and each row's summed gradient (vector and bias), filled while the
// batch is read: a row gets the next slot the first time it appears (``slot_map``: row -> slot or -1).
struct RowGradients {
  std::vector<int64_t> rows;  // distinct rows, in order of first appearance
  std::vector<float> vectors;  // rows.size() x D
  std::vector<float> biases;   // rows.size()
  int32_t* slot_map;
  int64_t D;

  RowGradients(int32_t* slot_map_, int64_t B, int64_t D_) : slot_map(slot_map_), D(D_) {
    rows.reserve(B);
    vectors.reserve(B * D);
    biases.reserve(B);
  }

  // The slot of ``row``, made (zero gradient) on its first appearance.
  inline int64_t slot(int64_t row) {
    int32_t& s = slot_map[row];
    if (s < 0) {
      s = static_cast<int32_t>(rows.size());
      rows.push_back(row);
      vectors.resize(vectors.size() + D, 0.0f);
      biases.push_back(0.0f);
    }
    return s;
  }

  // Leaves ``slot_map`` all -1 again.
  ~RowGradients() {
    for (int64_t r : rows) slot_map[r] = -1;
  }
};

// Prefetches the cache lines of a row of ``bytes`` bytes (for writing when ``write``).
inline void prefetch_row(const void* row, int64_t bytes, bool write) {
  const char* p = static_cast<const char*>(row);
  for (int64_t off = 0; off < bytes; off += 64) {
    if (write) {
      __builtin_prefetch(p + off, 1);
    } else {
      __builtin_prefetch(p + off, 0);
    }
  }
}

constexpr int64_t kAhead = 8;  // how many examples (rows) ahead the table reads are prefetched
constexpr int64_t kRowGrain = 512;  // distinct rows per thread's share of an update, at least
constexpr int64_t kElementGrain = 16384;  // bias entries per thread's share of the dense update, at least

struct AdamHyper {
  double lr, beta1, beta2, eps;
};

// Increments a step counter held as a 0-d float tensor (the optimizers' format) and returns the new count.
double next_step(at::Tensor& step) {
  EMBREG_CHECK(step.numel() == 1 && step.device().is_cpu(),
               "embreg MF step: a step counter must be a 1-element CPU tensor");
  if (step.scalar_type() == at::kFloat) {
    float* s = step.data_ptr<float>();
    *s += 1.0f;
    return static_cast<double>(*s);
  }
  EMBREG_CHECK(step.scalar_type() == at::kDouble, "embreg MF step: a step counter must be float32 or float64");
  double* s = step.data_ptr<double>();
  *s += 1.0;
  return *s;
}

// Lazy Adam (torch.optim.SparseAdam's arithmetic) on the distinct rows of a sparse table.
void lazy_adam_rows(const RowGradients& g, float* param, float* m, float* v, int64_t D, double t, const AdamHyper& h) {
  const float step_size = static_cast<float>(h.lr * std::sqrt(1.0 - std::pow(h.beta2, t)) / (1.0 - std::pow(h.beta1, t)));
  const float one_minus_b1 = static_cast<float>(1.0 - h.beta1), one_minus_b2 = static_cast<float>(1.0 - h.beta2);
  const float eps = static_cast<float>(h.eps);
  const int64_t n = static_cast<int64_t>(g.rows.size());
  at::parallel_for(0, n, kRowGrain, [&](int64_t first, int64_t last) {  // distinct rows: no two threads share one
    for (int64_t s = first; s < last; ++s) {
      if (s + kAhead < last) {
        const int64_t ahead = g.rows[s + kAhead] * D;
        prefetch_row(param + ahead, D * 4, true);
        prefetch_row(m + ahead, D * 4, true);
        prefetch_row(v + ahead, D * 4, true);
      }
      const int64_t off = g.rows[s] * D;
      const float* gr = g.vectors.data() + s * D;
      float* pr = param + off;
      float* mr = m + off;
      float* vr = v + off;
#pragma omp simd
      for (int64_t c = 0; c < D; ++c) {
        const float mc = mr[c] + (gr[c] - mr[c]) * one_minus_b1;
        const float vc = vr[c] + (gr[c] * gr[c] - vr[c]) * one_minus_b2;
        mr[c] = mc;
        vr[c] = vc;
        pr[c] -= step_size * (mc / (std::sqrt(vc) + eps));
      }
    }
  });
}

// Dense Adam (torch.optim.Adam's single-tensor arithmetic) on a whole bias vector; ``grad`` is dense.
void dense_adam(float* param, float* m, float* v, const float* grad, int64_t n, double t, const AdamHyper& h) {
  const double bias_correction1 = 1.0 - std::pow(h.beta1, t);
  const float step_size = static_cast<float>(h.lr / bias_correction1);
  const float bias_correction2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(h.beta2, t)));
  const float weight = static_cast<float>(1.0 - h.beta1), beta2 = static_cast<float>(h.beta2);
  const float one_minus_b2 = static_cast<float>(1.0 - h.beta2), eps = static_cast<float>(h.eps);
  at::parallel_for(0, n, kElementGrain, [&](int64_t first, int64_t last) {
#pragma omp simd
    for (int64_t r = first; r < last; ++r) {
      const float mc = m[r] + weight * (grad[r] - m[r]);
      const float vc = v[r] * beta2 + one_minus_b2 * grad[r] * grad[r];
      m[r] = mc;
      v[r] = vc;
      param[r] -= step_size * (mc / (std::sqrt(vc) / bias_correction2_sqrt + eps));
    }
  });
}

}  // namespace

// One fused training step; returns the batch loss (the model's loss). When the loss is not finite nothing is
// written. ``state`` holds, for "adam", per parameter (P, Q, bu, bi) its step counter, exp_avg and exp_avg_sq
// (12 tensors); for "sgd" it is empty. ``user_slots`` and ``item_slots`` are int32 maps of -1 of the tables'
// row counts (workspace; left all -1).
double mf_step(const at::Tensor& users, const at::Tensor& items, const at::Tensor& ratings, at::Tensor P, at::Tensor Q,
               at::Tensor bu, at::Tensor bi, double mu, double l2, const std::string& rule, double lr, double beta1,
               double beta2, double eps, std::vector<at::Tensor> state, at::Tensor user_slots, at::Tensor item_slots) {
  EMBREG_CHECK(users.scalar_type() == at::kLong && items.scalar_type() == at::kLong && users.dim() == 1 &&
                   items.sizes() == users.sizes() && users.is_contiguous() && items.is_contiguous() &&
                   users.device().is_cpu() && items.device().is_cpu(),
               "embreg MF step: users and items must be contiguous 1-d int64 CPU tensors of one length");
  EMBREG_CHECK(ratings.scalar_type() == at::kFloat && ratings.sizes() == users.sizes() && ratings.is_contiguous() &&
                   ratings.device().is_cpu(),
               "embreg MF step: ratings must be a contiguous 1-d float32 CPU tensor as long as the ids");
  check_table(P, "the user table", -1);
  const int64_t D = P.size(1);
  check_table(Q, "the item table", D);
  check_table(bu, "the user biases", 1);
  check_table(bi, "the item biases", 1);
  const int64_t U = P.size(0), I = Q.size(0), B = users.size(0);
  EMBREG_CHECK(bu.size(0) == U && bi.size(0) == I,
               "embreg MF step: bias tables must have as many rows as their vectors");
  EMBREG_CHECK(user_slots.scalar_type() == at::kInt && user_slots.numel() == U && user_slots.is_contiguous() &&
                   item_slots.scalar_type() == at::kInt && item_slots.numel() == I && item_slots.is_contiguous(),
               "embreg MF step: the slot maps must be contiguous int32 tensors of the tables' row counts");
  EMBREG_CHECK(rule == "adam" || rule == "sgd", "embreg MF step: rule must be 'adam' or 'sgd', got '", rule, "'");
  EMBREG_CHECK(rule == "sgd" ? state.empty() : state.size() == 12,
               "embreg MF step: 'adam' takes 12 state tensors (step, exp_avg, exp_avg_sq for P, Q, bu, bi), 'sgd' none");
  if (B == 0) return 0.0;

  const int64_t* u = users.data_ptr<int64_t>();
  const int64_t* it = items.data_ptr<int64_t>();
  for (int64_t b = 0; b < B; ++b) {
    EMBREG_CHECK(u[b] >= 0 && u[b] < U, "embreg MF step: user id ", u[b], " is outside [0, ", U, ")");
    EMBREG_CHECK(it[b] >= 0 && it[b] < I, "embreg MF step: item id ", it[b], " is outside [0, ", I, ")");
  }
  const float* r = ratings.data_ptr<float>();
  float* p = P.data_ptr<float>();
  float* q = Q.data_ptr<float>();
  float* pu = bu.data_ptr<float>();
  float* qi = bi.data_ptr<float>();
  const float fmu = static_cast<float>(mu);

  // (1) errors, the loss and each distinct row's summed gradient (scratch only: the parameters are written in (2),
  // after the loss is known to be finite)
  const float c = static_cast<float>(2.0 / B), cl2 = static_cast<float>(2.0 * l2 / B);
  RowGradients gu(user_slots.data_ptr<int32_t>(), B, D), gi(item_slots.data_ptr<int32_t>(), B, D);
  double squared = 0.0, norms = 0.0;
  for (int64_t b = 0; b < B; ++b) {
    if (b + kAhead < B) {
      prefetch_row(p + u[b + kAhead] * D, D * 4, false);
      prefetch_row(q + it[b + kAhead] * D, D * 4, false);
    }
    const float* pv = p + u[b] * D;
    const float* qv = q + it[b] * D;
    const float e = fmu + pu[u[b]] + qi[it[b]] + dot(pv, qv, D) - r[b];
    squared += static_cast<double>(e) * e;
    if (l2 != 0.0) {
      norms += static_cast<double>(squared_norm(pv, D)) + squared_norm(qv, D) +
               static_cast<double>(pu[u[b]]) * pu[u[b]] + static_cast<double>(qi[it[b]]) * qi[it[b]];
    }
    const float ce = c * e;
    const int64_t su = gu.slot(u[b]), si = gi.slot(it[b]);
    axpbz(gu.vectors.data() + su * D, ce, qv, cl2, pv, D);
    axpbz(gi.vectors.data() + si * D, ce, pv, cl2, qv, D);
    gu.biases[su] += ce + cl2 * pu[u[b]];
    gi.biases[si] += ce + cl2 * qi[it[b]];
  }
  const double loss = squared / B + l2 * norms / B;
  if (!std::isfinite(loss)) return loss;

  // (2) the update
  if (rule == "sgd") {
    const float flr = static_cast<float>(lr);
    for (auto* g : {&gu, &gi}) {
      float* table = g == &gu ? p : q;
      float* bias = g == &gu ? pu : qi;
      for (size_t s = 0; s < g->rows.size(); ++s) {
        float* row = table + g->rows[s] * D;
        const float* gr = g->vectors.data() + s * D;
#pragma omp simd
        for (int64_t k = 0; k < D; ++k) row[k] -= flr * gr[k];
        bias[g->rows[s]] -= flr * g->biases[s];
      }
    }
    return loss;
  }
  const AdamHyper h{lr, beta1, beta2, eps};
  at::Tensor* params[4] = {&P, &Q, &bu, &bi};
  for (int k = 0; k < 4; ++k) {
    check_like(state[3 * k + 1], *params[k], "exp_avg");
    check_like(state[3 * k + 2], *params[k], "exp_avg_sq");
  }
  lazy_adam_rows(gu, p, state[1].data_ptr<float>(), state[2].data_ptr<float>(), D, next_step(state[0]), h);
  lazy_adam_rows(gi, q, state[4].data_ptr<float>(), state[5].data_ptr<float>(), D, next_step(state[3]), h);
  for (auto* g : {&gu, &gi}) {
    const bool user = g == &gu;
    const int64_t n = user ? U : I;
    std::vector<float> grad(n, 0.0f);
    for (size_t s = 0; s < g->rows.size(); ++s) grad[g->rows[s]] = g->biases[s];
    const int k = user ? 2 : 3;
    dense_adam(user ? pu : qi, state[3 * k + 1].data_ptr<float>(), state[3 * k + 2].data_ptr<float>(), grad.data(), n,
               next_step(state[3 * k]), h);
  }
  return loss;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("mf_step", EMBREG_GUARDED(mf_step), "one fused biased-MF training step on sparse tables (see mf_step.cpp)");
}
