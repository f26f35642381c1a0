// Fused CPU forward and backward of the mixed-dimension lookup (float32).
//
// Paper: mixed-dimension-embeddings.txt, Sec. III (the block-factored table E_i P_i) and Appendix, Alg. 2 (the
// lookup). The same computation as embreg/embeddings/functional.py (_MixedDimensionLookup), as one C++ autograd
// node (no Python runs in the step's forward or backward), in two parts:
//
//   forward:  one pass over the ids maps each through the optional index map (range-checked, the map's reads
//             prefetched ahead), finds the distinct positions of the batch (open-addressing hash, in order of
//             first appearance) and counts occurrences; the distinct rows are grouped by block (a stable
//             counting sort), each row's occurrence list is laid out, the rows are gathered into one packed
//             buffer (prefetched ahead of the cache misses), each distinct row is projected once
//             (x_u = E_i[u] P_i) into the output row of its first occurrence and copied to the others.
//   backward: per block, each distinct row's gradient G_u (the sum of g_j over its occurrences) is summed as it
//             is used, then grad E_i[u] = G_u P_i^T and grad P_i += E_i[u]^T G_u, and the row gradients are
//             returned as one sparse COO tensor per block (indices distinct, in first-appearance order, so not
//             marked coalesced) or scattered into a dense zero table. First derivatives only: a backward that
//             would itself be differentiated (create_graph=True) raises.
//
// Everything is single-threaded: at the batch sizes of a training step the work is bound by memory latency
// (the rare rows' cache misses) and the fixed cost per call, not by arithmetic.

#include <torch/extension.h>

#include <cstdint>
#include <cstring>
#include <algorithm>
#include <limits>
#include <optional>
#include <type_traits>
#include <vector>

namespace {

constexpr int64_t kPrefetchAhead = 16;  // how far ahead the map reads and row gathers are prefetched

bool is_identity(const at::Tensor& projection) { return !projection.defined() || projection.numel() == 0; }

// The block holding position p: offsets[b] <= p < offsets[b + 1] (k is small, a linear scan is fastest).
inline int64_t block_of(const int64_t* offsets, int64_t k, int64_t p) {
  int64_t b = 0;
  while (b + 1 < k && p >= offsets[b + 1]) ++b;
  return b;
}

// out[0:D] = e[0:d] P (P is d x D, row-major), for any D.
inline void project_row(const float* e, const float* P, int64_t d, int64_t D, float* out) {
#pragma omp simd
  for (int64_t c = 0; c < D; ++c) out[c] = e[0] * P[c];
  for (int64_t q = 1; q < d; ++q) {
    const float eq = e[q];
    const float* Pq = P + q * D;
#pragma omp simd
    for (int64_t c = 0; c < D; ++c) out[c] += eq * Pq[c];
  }
}

// The same for a width known at compile time: the accumulator row stays in vector registers.
template <int64_t kWidth>
inline void project_row_fixed(const float* e, const float* P, int64_t d, float* out) {
  float acc[kWidth];
#pragma omp simd
  for (int64_t c = 0; c < kWidth; ++c) acc[c] = e[0] * P[c];
  for (int64_t q = 1; q < d; ++q) {
    const float eq = e[q];
    const float* Pq = P + q * kWidth;
#pragma omp simd
    for (int64_t c = 0; c < kWidth; ++c) acc[c] += eq * Pq[c];
  }
#pragma omp simd
  for (int64_t c = 0; c < kWidth; ++c) out[c] = acc[c];
}

// The output gradient and the occurrence lists: G_v, the gradient of distinct row v, is the sum of the rows of
// grad_out (any strides) at v's occurrences.
struct SummedGradient {
  const float* grad;
  int64_t row_stride, column_stride, width;
  const int32_t* occurrence_start;
  const int32_t* occurrences;

  void row(int64_t v, float* dst) const {
    const int32_t begin = occurrence_start[v], end = occurrence_start[v + 1];
    const float* src = grad + occurrences[begin] * row_stride;
    if (column_stride == 1) {
      std::memcpy(dst, src, width * sizeof(float));
      for (int32_t i = begin + 1; i < end; ++i) {
        src = grad + occurrences[i] * row_stride;
#pragma omp simd
        for (int64_t c = 0; c < width; ++c) dst[c] += src[c];
      }
    } else if (column_stride == 0) {  // each row one value broadcast over the columns
      float total = src[0];
      for (int32_t i = begin + 1; i < end; ++i) total += grad[occurrences[i] * row_stride];
#pragma omp simd
      for (int64_t c = 0; c < width; ++c) dst[c] = total;
    } else {
      for (int64_t c = 0; c < width; ++c) dst[c] = src[c * column_stride];
      for (int32_t i = begin + 1; i < end; ++i) {
        src = grad + occurrences[i] * row_stride;
        for (int64_t c = 0; c < width; ++c) dst[c] += src[c * column_stride];
      }
    }
  }
};

// grad_rows[r][q0 + l] = G_r . P^T[:, q0 + l] for l < lanes and the `kRows` rows r of G starting at G (stride W),
// against P^T padded to `padded` columns: 4 x kRows independent vector accumulators (the W terms split four
// ways), so the FMAs do not wait on each other's latency and each P^T load serves kRows rows.
template <int64_t kWidth, int64_t kRows>
inline void rows_times_transposed(const float* G, const float* transposed, int64_t padded, int64_t q0, int64_t lanes,
                                  int64_t d, float* grad_rows) {
  constexpr int64_t kLanes = 16;
  float acc[kRows][4][kLanes] = {};
  for (int64_t c = 0; c < kWidth; c += 4) {
    for (int64_t a = 0; a < 4; ++a) {
      const float* column = transposed + (c + a) * padded + q0;
      for (int64_t r = 0; r < kRows; ++r) {
        const float gc = G[r * kWidth + c + a];
#pragma omp simd
        for (int64_t l = 0; l < kLanes; ++l) acc[r][a][l] += gc * column[l];
      }
    }
  }
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t l = 0; l < lanes; ++l) {
      grad_rows[r * d + q0 + l] = (acc[r][0][l] + acc[r][1][l]) + (acc[r][2][l] + acc[r][3][l]);
    }
  }
}

// P_q . g for one W-wide row pair: four 16-wide partial sums, then a tree over the 16 lanes.
template <int64_t kWidth>
inline float dot_row(const float* Pq, const float* g) {
  constexpr int64_t kLanes = 16;
  static_assert(kWidth % kLanes == 0, "widths are multiples of 16");
  float acc[kLanes] = {};
  for (int64_t c = 0; c < kWidth; c += kLanes) {
#pragma omp simd
    for (int64_t l = 0; l < kLanes; ++l) acc[l] += Pq[c + l] * g[c + l];
  }
  float half[kLanes / 2];
#pragma omp simd
  for (int64_t l = 0; l < kLanes / 2; ++l) half[l] = acc[l] + acc[l + kLanes / 2];
  float quarter[kLanes / 4];
  for (int64_t l = 0; l < kLanes / 4; ++l) quarter[l] = half[l] + half[l + kLanes / 4];
  return (quarter[0] + quarter[2]) + (quarter[1] + quarter[3]);
}

// The backward of a block with a small d (<= kSmallDim): grad_rows[u][q] = P_q . G_u as d dot products per row,
// which beats the padded-P^T accumulators when most of their 16 lanes would be padding.
constexpr int64_t kSmallDim = 8;

template <int64_t kWidth>
void block_backward_small(const SummedGradient& summed, int64_t first, const float* rows, const float* P, int64_t m,
                          int64_t d, float* grad_rows, float* grad_projection) {
  float g[kWidth];
  for (int64_t u = 0; u < m; ++u) {
    summed.row(first + u, g);
    const float* e = rows + u * d;
    for (int64_t q = 0; q < d; ++q) {
      grad_rows[u * d + q] = dot_row<kWidth>(P + q * kWidth, g);
      const float eq = e[q];
      float* gp = grad_projection + q * kWidth;
#pragma omp simd
      for (int64_t c = 0; c < kWidth; ++c) gp[c] += eq * g[c];
    }
  }
}

// One block's backward at a compile-time width W, over its m distinct rows first, first + 1, ...: grad_rows
// (m x d) = G P^T and grad_projection (d x W, zeroed by the caller) += rows^T G, where G (m x W) is the summed
// output gradient (each row summed into a register-sized buffer as it is needed, never stored) and rows (m x d)
// the gathered E_i rows. G P^T is computed against P^T padded to a multiple of 16 columns, so each row's d
// outputs are 16-wide vector accumulators (no horizontal sums); rows go two at a time.
template <int64_t kWidth>
void block_backward_fixed(const SummedGradient& summed, int64_t first, const float* rows, const float* P, int64_t m,
                          int64_t d, float* grad_rows, float* grad_projection) {
  constexpr int64_t kLanes = 16;
  const int64_t padded = (d + kLanes - 1) / kLanes * kLanes;
  std::vector<float> transposed(kWidth * padded, 0.f);  // P^T, W x padded
  for (int64_t q = 0; q < d; ++q) {
    for (int64_t c = 0; c < kWidth; ++c) transposed[c * padded + q] = P[q * kWidth + c];
  }
  float G[2 * kWidth];
  int64_t u = 0;
  for (; u + 2 <= m; u += 2) {
    const float* g0 = G;
    const float* g1 = G + kWidth;
    summed.row(first + u, G);
    summed.row(first + u + 1, G + kWidth);
    for (int64_t q0 = 0; q0 < d; q0 += kLanes) {
      rows_times_transposed<kWidth, 2>(g0, transposed.data(), padded, q0, std::min(kLanes, d - q0), d,
                                       grad_rows + u * d);
    }
    const float* e0 = rows + u * d;
    const float* e1 = e0 + d;
    for (int64_t q = 0; q < d; ++q) {
      const float a0 = e0[q], a1 = e1[q];
      float* gp = grad_projection + q * kWidth;
#pragma omp simd
      for (int64_t c = 0; c < kWidth; ++c) gp[c] += a0 * g0[c] + a1 * g1[c];
    }
  }
  for (; u < m; ++u) {
    const float* g0 = G;
    summed.row(first + u, G);
    for (int64_t q0 = 0; q0 < d; q0 += kLanes) {
      rows_times_transposed<kWidth, 1>(g0, transposed.data(), padded, q0, std::min(kLanes, d - q0), d,
                                       grad_rows + u * d);
    }
    const float* e0 = rows + u * d;
    for (int64_t q = 0; q < d; ++q) {
      const float a0 = e0[q];
      float* gp = grad_projection + q * kWidth;
#pragma omp simd
      for (int64_t c = 0; c < kWidth; ++c) gp[c] += a0 * g0[c];
    }
  }
}

// Runs body(std::integral_constant<int64_t, W>) for the widths W with a compiled fast path; false for others.
template <typename Body>
bool with_fixed_width(int64_t width, Body&& body) {
  switch (width) {
    case 16: body(std::integral_constant<int64_t, 16>{}); return true;
    case 32: body(std::integral_constant<int64_t, 32>{}); return true;
    case 64: body(std::integral_constant<int64_t, 64>{}); return true;
    case 128: body(std::integral_constant<int64_t, 128>{}); return true;
    default: return false;
  }
}

}  // namespace

// ids (B) int64; index_map (N) int32/int64 or empty; offsets (k + 1) int64; weights k x (n_i, d_i) float32;
// projections k x (d_i, D) float32 or empty (identity). Returns out (B, D); the occurrence lists of the U distinct
// rows (grouped by block), occurrence_start (U + 1) int32 and occurrences (B) int32 (the ids of distinct row v are
// occurrences[occurrence_start[v] ... occurrence_start[v + 1]), in order); local (U) int64 (each distinct row's
// row within its block); bounds (k + 1) int64 (block i's distinct rows are [bounds[i], bounds[i + 1])); and rows
// (sum_i U_i d_i) float32 (the gathered distinct rows, block by block, for the backward).
std::vector<at::Tensor> md_forward(const at::Tensor& ids, const at::Tensor& index_map, const at::Tensor& offsets_t,
                                   const std::vector<at::Tensor>& weights, const std::vector<at::Tensor>& projections,
                                   int64_t out_dim) {
  const int64_t n = ids.numel();
  const int64_t k = static_cast<int64_t>(weights.size());
  const int64_t* offsets = offsets_t.data_ptr<int64_t>();
  const int64_t num_rows = offsets[k];
  TORCH_CHECK(n < std::numeric_limits<int32_t>::max(), "embreg md kernel: batch of ", n, " ids is too large");
  TORCH_CHECK(num_rows < std::numeric_limits<int32_t>::max(),
              "embreg md kernel: tables of 2^31 rows or more are not supported");

  // one pass over the ids: map and range-check each, find the distinct positions in order of first appearance
  // (open addressing, load factor <= 1/2), and count each distinct row's occurrences and each block's rows
  const int64_t* id_ptr = ids.data_ptr<int64_t>();
  const bool mapped = index_map.defined() && index_map.numel() > 0;
  const bool map_is_int = mapped && index_map.scalar_type() == at::kInt;
  const int32_t* map32 = map_is_int ? index_map.data_ptr<int32_t>() : nullptr;
  const int64_t* map64 = mapped && !map_is_int ? index_map.data_ptr<int64_t>() : nullptr;
  int bits = 4;
  while ((int64_t{1} << bits) < 2 * n) ++bits;
  const int64_t mask = (int64_t{1} << bits) - 1;
  struct Slot {
    int32_t position;  // -1: empty
    int32_t distinct;  // the distinct row's index, in order of first appearance
  };
  std::vector<Slot> table(mask + 1, Slot{-1, 0});
  std::vector<int32_t> raw_inverse(n), count;
  std::vector<int64_t> distinct, block, bounds(k + 1, 0);
  distinct.reserve(n);
  block.reserve(n);
  count.reserve(n);
  for (int64_t j = 0; j < n; ++j) {
    if (mapped && j + kPrefetchAhead < n) {  // the map's cache misses overlap the hashing of earlier ids
      const int64_t ahead = id_ptr[j + kPrefetchAhead];
      if (ahead >= 0 && ahead < num_rows) {
        if (map32) {
          __builtin_prefetch(map32 + ahead);
        } else {
          __builtin_prefetch(map64 + ahead);
        }
      }
    }
    const int64_t id = id_ptr[j];
    TORCH_CHECK(id >= 0 && id < num_rows, "embreg md kernel: found id ", id, "; valid range is [0, ", num_rows, ")");
    const int64_t p = map32 ? static_cast<int64_t>(map32[id]) : (map64 ? map64[id] : id);
    int64_t s = static_cast<int64_t>((static_cast<uint64_t>(p) * 0x9E3779B97F4A7C15ULL) >> (64 - bits));
    while (table[s].position != p && table[s].position != -1) s = (s + 1) & mask;
    if (table[s].position == -1) {
      table[s] = Slot{static_cast<int32_t>(p), static_cast<int32_t>(distinct.size())};
      distinct.push_back(p);
      block.push_back(block_of(offsets, k, p));
      ++bounds[block.back() + 1];
      count.push_back(0);
    }
    raw_inverse[j] = table[s].distinct;
    ++count[table[s].distinct];
  }
  const int64_t num_distinct = static_cast<int64_t>(distinct.size());

  // group the distinct rows by block, keeping their order within a block, and lay out their occurrence lists:
  // the ids of distinct row v are occurrences[occurrence_start[v] ... occurrence_start[v + 1]), in order
  for (int64_t b = 0; b < k; ++b) bounds[b + 1] += bounds[b];
  std::vector<int64_t> cursor(bounds.begin(), bounds.end() - 1);
  std::vector<int32_t> grouped(num_distinct);
  auto local_t = at::empty({num_distinct}, ids.options());
  int64_t* local = local_t.data_ptr<int64_t>();
  auto start_t = at::empty({num_distinct + 1}, ids.options().dtype(at::kInt));
  int32_t* occurrence_start = start_t.data_ptr<int32_t>();
  for (int64_t u = 0; u < num_distinct; ++u) {
    const int64_t v = cursor[block[u]]++;
    grouped[u] = static_cast<int32_t>(v);
    local[v] = distinct[u] - offsets[block[u]];
    occurrence_start[v + 1] = count[u];
  }
  occurrence_start[0] = 0;
  for (int64_t v = 0; v < num_distinct; ++v) occurrence_start[v + 1] += occurrence_start[v];
  auto occurrences_t = at::empty({n}, ids.options().dtype(at::kInt));
  int32_t* occurrences = occurrences_t.data_ptr<int32_t>();
  std::vector<int32_t> fill(occurrence_start, occurrence_start + num_distinct);
  for (int64_t j = 0; j < n; ++j) occurrences[fill[grouped[raw_inverse[j]]]++] = static_cast<int32_t>(j);

  // gather the distinct rows of every block into one packed buffer
  std::vector<int64_t> row_start(k + 1, 0);
  for (int64_t b = 0; b < k; ++b) row_start[b + 1] = row_start[b] + (bounds[b + 1] - bounds[b]) * weights[b].size(1);
  auto rows_t = at::empty({row_start[k]}, weights[0].options());
  float* rows = rows_t.data_ptr<float>();
  for (int64_t b = 0; b < k; ++b) {
    const int64_t d = weights[b].size(1), start = bounds[b], stop = bounds[b + 1];
    const float* E = weights[b].data_ptr<float>();
    float* dst = rows + row_start[b];
    for (int64_t v = start; v < stop; ++v) {
      if (v + kPrefetchAhead < stop) __builtin_prefetch(E + local[v + kPrefetchAhead] * d);
      std::memcpy(dst + (v - start) * d, E + local[v] * d, d * sizeof(float));
    }
  }

  // project each distinct row once, into the output row of its first occurrence; copy it to the others
  const int64_t D = out_dim;
  auto out_t = at::empty({n, D}, weights[0].options());
  float* out = out_t.data_ptr<float>();
  for (int64_t b = 0; b < k; ++b) {
    const int64_t d = weights[b].size(1);
    const bool identity = is_identity(projections[b]);
    const float* P = identity ? nullptr : projections[b].data_ptr<float>();
    const float* src = rows + row_start[b];
    for (int64_t v = bounds[b]; v < bounds[b + 1]; ++v) {
      float* o = out + static_cast<int64_t>(occurrences[occurrence_start[v]]) * D;
      const float* e = src + (v - bounds[b]) * d;
      if (identity) {
        std::memcpy(o, e, D * sizeof(float));
      } else if (!with_fixed_width(D, [&](auto W) { project_row_fixed<W()>(e, P, d, o); })) {
        project_row(e, P, d, D, o);
      }
    }
  }
  for (int64_t v = 0; v < num_distinct; ++v) {
    const float* row = out + static_cast<int64_t>(occurrences[occurrence_start[v]]) * D;
    for (int32_t i = occurrence_start[v] + 1; i < occurrence_start[v + 1]; ++i) {
      std::memcpy(out + static_cast<int64_t>(occurrences[i]) * D, row, D * sizeof(float));
    }
  }

  auto bounds_t = at::empty({k + 1}, ids.options());
  std::memcpy(bounds_t.data_ptr<int64_t>(), bounds.data(), (k + 1) * sizeof(int64_t));
  return {out_t, start_t, occurrences_t, local_t, bounds_t, rows_t};
}

// grad_out (B, D) float32, any strides, the forward's occurrence lists, local, bounds and rows, the blocks' shapes
// (n_i and d_i) and projections (the tables' values are not needed: the gathered rows are). Returns k weight
// gradients (sparse COO (n_i, d_i) when `sparse`, else dense (n_i, d_i)) then k projection gradients (d_i, D)
// (undefined, i.e. None, for identity blocks). A block no id fell in gets no gradients at all (None).
std::vector<at::Tensor> md_backward(const at::Tensor& grad_out, const at::Tensor& start_t,
                                    const at::Tensor& occurrences_t, const at::Tensor& local_t,
                                    const at::Tensor& bounds_t, const at::Tensor& rows_t,
                                    const std::vector<int64_t>& block_rows, const std::vector<int64_t>& block_dims,
                                    const std::vector<at::Tensor>& projections, bool sparse) {
  const int64_t D = grad_out.size(1);
  const int64_t k = static_cast<int64_t>(block_dims.size());
  const int64_t* bounds = bounds_t.data_ptr<int64_t>();
  const int64_t* local = local_t.data_ptr<int64_t>();
  const SummedGradient summed{grad_out.data_ptr<float>(), grad_out.stride(0), grad_out.stride(1), D,
                              start_t.data_ptr<int32_t>(), occurrences_t.data_ptr<int32_t>()};
  auto summed_block = [&](int64_t start, int64_t count) {  // G for rows start ... start + count - 1
    at::Tensor block = at::empty({count, D}, grad_out.options());
    float* ptr = block.data_ptr<float>();
    for (int64_t v = 0; v < count; ++v) summed.row(start + v, ptr + v * D);
    return block;
  };

  std::vector<at::Tensor> grads(2 * k);
  int64_t row_offset = 0;
  for (int64_t b = 0; b < k; ++b) {
    const int64_t start = bounds[b], count = bounds[b + 1] - start, d = block_dims[b];
    if (count == 0) continue;  // no id fell in this block: no gradient, as if the block were not used
    at::Tensor values;
    if (is_identity(projections[b])) {
      values = summed_block(start, count);
    } else {
      at::Tensor gathered = rows_t.narrow(0, row_offset, count * d).view({count, d});
      at::Tensor grad_rows = at::empty({count, d}, grad_out.options());
      at::Tensor grad_projection = at::zeros({d, D}, grad_out.options());
      const bool fixed = with_fixed_width(D, [&](auto W) {
        const auto run = d <= kSmallDim ? &block_backward_small<W()> : &block_backward_fixed<W()>;
        run(summed, start, gathered.data_ptr<float>(), projections[b].data_ptr<float>(), count, d,
            grad_rows.data_ptr<float>(), grad_projection.data_ptr<float>());
      });
      if (!fixed) {  // other widths: two matrix products
        const at::Tensor block_grad = summed_block(start, count);
        at::mm_out(grad_rows, block_grad, projections[b].t());
        at::mm_out(grad_projection, gathered.t(), block_grad);
      }
      values = grad_rows;
      grads[k + b] = grad_projection;
    }
    row_offset += count * d;
    if (sparse) {
      grads[b] = at::_sparse_coo_tensor_unsafe(local_t.narrow(0, start, count).view({1, count}), values,
                                               {block_rows[b], d});
    } else {
      auto dense = at::zeros({block_rows[b], d}, grad_out.options());
      float* dense_ptr = dense.data_ptr<float>();
      const float* value_ptr = values.data_ptr<float>();
      for (int64_t v = 0; v < count; ++v) {
        std::memcpy(dense_ptr + local[start + v] * d, value_ptr + v * d, d * sizeof(float));
      }
      grads[b] = dense;
    }
  }
  return grads;
}

// The autograd node. Inputs: ids, index_map, offsets, sparse, out_dim, the k tables, the k projections (empty
// tensors for identity blocks); gradients flow to the tables and projections only.
struct FusedLookup : public torch::autograd::Function<FusedLookup> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& ids, const at::Tensor& index_map,
                            const at::Tensor& offsets, bool sparse, int64_t out_dim, at::TensorList weights,
                            at::TensorList projections) {
    std::vector<at::Tensor> outputs = md_forward(ids, index_map, offsets, weights.vec(), projections.vec(), out_dim);
    std::vector<int64_t> rows, dims;
    for (const auto& w : weights) {
      rows.push_back(w.size(0));
      dims.push_back(w.size(1));
    }
    ctx->saved_data["sparse"] = sparse;
    ctx->saved_data["rows"] = rows;
    ctx->saved_data["dims"] = dims;
    // the backward reads the gathered rows, not the tables, so only the projections are saved
    torch::autograd::variable_list saved(outputs.begin() + 1, outputs.end());
    saved.insert(saved.end(), projections.begin(), projections.end());
    ctx->save_for_backward(saved);
    return outputs[0];
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    TORCH_CHECK(!at::GradMode::is_enabled(),
                "embreg's fused mixed-dimension lookup gives first derivatives only; for a second derivative "
                "(create_graph=True) use embreg.embeddings.functional.mixed_dimension_lookup_reference");
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    const std::vector<int64_t> rows = ctx->saved_data["rows"].toIntVector();
    const std::vector<int64_t> dims = ctx->saved_data["dims"].toIntVector();
    const int64_t k = static_cast<int64_t>(dims.size());
    std::vector<at::Tensor> projections(saved.begin() + 5, saved.end());
    std::vector<at::Tensor> grads = md_backward(grad_outputs[0], saved[0], saved[1], saved[2], saved[3], saved[4],
                                                rows, dims, projections, ctx->saved_data["sparse"].toBool());
    // one entry per forward argument: ids, index_map, offsets, sparse, out_dim, then the tables and projections
    torch::autograd::variable_list result(5);
    for (int64_t i = 0; i < 2 * k; ++i) {
      result.push_back(ctx->needs_input_grad(3 + i) ? grads[i] : at::Tensor());
    }
    return result;
  }
};

// Whether the node can serve these tables: float32, contiguous, on the CPU (projections may be empty).
bool tables_supported(const std::vector<at::Tensor>& weights, const std::vector<at::Tensor>& projections) {
  auto supported = [](const at::Tensor& t) {
    return t.scalar_type() == at::kFloat && t.device().is_cpu() && t.is_contiguous() && t.dim() == 2;
  };
  for (const auto& w : weights) {
    if (!supported(w)) return false;
  }
  for (const auto& p : projections) {
    if (!is_identity(p) && !supported(p)) return false;
  }
  return true;
}

// Projections with None (identity blocks) as empty tensors, as the node takes them.
std::vector<at::Tensor> with_empty(const std::vector<std::optional<at::Tensor>>& projections) {
  std::vector<at::Tensor> out;
  out.reserve(projections.size());
  for (const auto& p : projections) out.push_back(p.has_value() && p->defined() ? *p : at::empty({0}, at::kFloat));
  return out;
}

bool optional_tables_supported(const std::vector<at::Tensor>& weights,
                               const std::vector<std::optional<at::Tensor>>& projections) {
  return !weights.empty() && tables_supported(weights, with_empty(projections));
}

// The lookup of ids of any shape and integer dtype -> (..., D), or None where the tables are not supported (the
// caller then takes the tensor ops). index_map: None or (N) integer; projections: None for identity blocks.
std::optional<at::Tensor> md_lookup(const at::Tensor& ids, const std::optional<at::Tensor>& index_map,
                                    const at::Tensor& offsets, bool sparse, const std::vector<at::Tensor>& weights,
                                    const std::vector<std::optional<at::Tensor>>& projections) {
  const std::vector<at::Tensor> dense_projections = with_empty(projections);
  if (weights.empty() || !tables_supported(weights, dense_projections)) return std::nullopt;
  const int64_t out_dim = is_identity(dense_projections[0]) ? weights[0].size(1) : dense_projections[0].size(1);
  const at::Tensor flat = ids.reshape({-1}).to(at::kLong).contiguous();
  at::Tensor map = at::empty({0}, flat.options());
  if (index_map.has_value() && index_map->defined()) {
    map = index_map->scalar_type() == at::kInt ? index_map->contiguous() : index_map->to(at::kLong).contiguous();
  }
  const at::Tensor out = FusedLookup::apply(flat, map, offsets, sparse, out_dim, at::TensorList(weights),
                                            at::TensorList(dense_projections));
  std::vector<int64_t> shape = ids.sizes().vec();
  shape.push_back(out_dim);
  return out.view(shape);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("lookup", &md_lookup, "mixed-dimension lookup as one autograd node (see md_lookup.cpp)");
  m.def("tables_supported", &optional_tables_supported, "whether the node can serve these tables");
}
