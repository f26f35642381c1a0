// Fused CPU forward and backward of the mixed-dimension lookup (float32).
//
// Paper: mixed-dimension-embeddings.txt, Sec. III (the block-factored table E_i P_i) and Appendix, Alg. 2 (the
// lookup). The same computation as embreg/embeddings/functional.py (_MixedDimensionLookup), as one C++ autograd
// node (no Python runs in the step's forward or backward) over the layer's two flat parameters: every block's
// rows E_i, one after the other, and every non-identity block's projection P_i, one after the other. Two
// parameters instead of 2k keep autograd's fixed cost per parameter (an accumulation node, a sparse tensor
// each) off the step. In two parts:
//
//   forward:  one pass over the ids maps each through the optional index map (range-checked, the map's reads
//             prefetched ahead), finds the distinct positions of the batch (open-addressing hash, in order of
//             first appearance) and counts occurrences; the distinct rows are grouped by block (a stable
//             counting sort), each row's occurrence list is laid out, the rows are gathered into one packed
//             buffer (prefetched ahead of the cache misses), each distinct row is projected once
//             (x_u = E_i[u] P_i, two rows per load of P_i) into the output row of its first occurrence and
//             copied to the others.
//   backward: per block, each distinct row's gradient G_u (the sum of g_j over its occurrences) is summed in
//             registers as it is used, then grad E_i[u] = G_u P_i^T (d_i dot products) and grad P_i +=
//             E_i[u]^T G_u, two rows at a time; the row gradients come back as one sparse COO tensor over the
//             flat rows (one entry per value of a distinct row; indices distinct, not sorted, so not marked
//             coalesced) or scattered into a dense zero vector. First derivatives only: a backward that
//             would itself be differentiated (create_graph=True) raises.
//
// Everything is single-threaded: at the batch sizes of a training step the work is bound by memory latency
// (the rare rows' cache misses) and the fixed cost per call, not by arithmetic. The arithmetic that remains is
// written with GCC/Clang vector types (FloatVec) so that its accumulators stay in registers; a compiler
// without them fails the build, and the layer then takes the tensor ops (see _kernel.py).

#include <torch/extension.h>

#include "embreg_errors.h"

#include <cstdint>
#include <cstring>
#include <algorithm>
#include <limits>
#include <optional>
#include <type_traits>
#include <vector>

namespace {

constexpr int64_t kPrefetchAhead = 16;  // how far ahead the map reads and row gathers are prefetched

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

// One vector register of floats as a value (GCC/Clang vector extension), as wide as the target's registers:
// 16 lanes with AVX-512 (32 registers), 8 with AVX (16 registers), else 4 (SSE, NEON). Accumulators held as
// these stay in registers, where float arrays under `omp simd` were kept on the stack; a vector wider than the
// registers would be split by the compiler, and slowly.
#if defined(__AVX512F__)
constexpr int64_t kLanes = 16;
constexpr int64_t kRegisters = 32;
#elif defined(__AVX__)
constexpr int64_t kLanes = 8;
constexpr int64_t kRegisters = 16;
#else
constexpr int64_t kLanes = 4;
constexpr int64_t kRegisters = 16;
#endif
typedef float FloatVec __attribute__((vector_size(kLanes * sizeof(float))));
inline FloatVec load_vec(const float* p) {
  FloatVec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store_vec(float* p, const FloatVec& v) { std::memcpy(p, &v, sizeof v); }

// How many rows the fixed-width loops below handle per pass at width W: two when two rows' W / kLanes
// accumulators fill at most half the registers (the rest hold loads and the other operands), else one.
template <int64_t kWidth>
constexpr int64_t rows_per_pass() {
  return 2 * (kWidth / kLanes) <= kRegisters / 2 ? 2 : 1;
}

// out[r][0:W] = e[r d : r d + d] P for the kRows consecutive gathered rows at e (P is d x W, row-major): each
// load of P serves every row, and the kRows x W / kLanes accumulators are independent (no FMA waits on another).
template <int64_t kWidth, int64_t kRows>
inline void project_rows_fixed(const float* e, const float* P, int64_t d, float* const* out) {
  constexpr int64_t kVecs = kWidth / kLanes;
  FloatVec acc[kRows][kVecs];
  for (int64_t v = 0; v < kVecs; ++v) {
    const FloatVec p = load_vec(P + kLanes * v);
    for (int64_t r = 0; r < kRows; ++r) acc[r][v] = e[r * d] * p;
  }
  for (int64_t q = 1; q < d; ++q) {
    for (int64_t v = 0; v < kVecs; ++v) {
      const FloatVec p = load_vec(P + q * kWidth + kLanes * v);
      for (int64_t r = 0; r < kRows; ++r) acc[r][v] += e[r * d + q] * p;
    }
  }
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t v = 0; v < kVecs; ++v) store_vec(out[r] + kLanes * v, acc[r][v]);
  }
}

// The output gradient and the occurrence lists: G_v, the gradient of distinct row v, is the sum of the rows of
// grad_out (any strides) at v's occurrences.
struct SummedGradient {
  const float* grad;
  int64_t row_stride, column_stride, width;
  const int64_t* occurrence_start;
  const int64_t* occurrences;

  void row(int64_t v, float* dst) const {
    const int64_t begin = occurrence_start[v], end = occurrence_start[v + 1];
    const float* src = grad + occurrences[begin] * row_stride;
    if (column_stride == 1) {
      std::memcpy(dst, src, width * sizeof(float));
      for (int64_t i = begin + 1; i < end; ++i) {
        src = grad + occurrences[i] * row_stride;
#pragma omp simd
        for (int64_t c = 0; c < width; ++c) dst[c] += src[c];
      }
    } else if (column_stride == 0) {  // each row one value broadcast over the columns
      float total = src[0];
      for (int64_t i = begin + 1; i < end; ++i) total += grad[occurrences[i] * row_stride];
#pragma omp simd
      for (int64_t c = 0; c < width; ++c) dst[c] = total;
    } else {
      for (int64_t c = 0; c < width; ++c) dst[c] = src[c * column_stride];
      for (int64_t i = begin + 1; i < end; ++i) {
        src = grad + occurrences[i] * row_stride;
        for (int64_t c = 0; c < width; ++c) dst[c] += src[c * column_stride];
      }
    }
  }
};

// The sum of v's lanes: halves added as vectors (copying a half compiles to a register move) down to four
// lanes, then a tree.
inline float sum_lanes(const FloatVec& v) {
  typedef float Floats4 __attribute__((vector_size(16)));
  Floats4 quarter;
  if constexpr (kLanes == 4) {
    std::memcpy(&quarter, &v, sizeof quarter);
  } else {
    typedef float Floats8 __attribute__((vector_size(32)));
    Floats8 half;
    if constexpr (kLanes == 8) {
      std::memcpy(&half, &v, sizeof half);
    } else {
      Floats8 low, high;
      std::memcpy(&low, &v, sizeof low);
      std::memcpy(&high, reinterpret_cast<const char*>(&v) + sizeof low, sizeof high);
      half = low + high;
    }
    Floats4 first, second;
    std::memcpy(&first, &half, sizeof first);
    std::memcpy(&second, reinterpret_cast<const char*>(&half) + sizeof first, sizeof second);
    quarter = first + second;
  }
  return (quarter[0] + quarter[2]) + (quarter[1] + quarter[3]);
}

// G_v as W / kLanes register values (W = kWidth): summed in registers where the output gradient's rows are
// contiguous, else through `buffer` (W floats).
template <int64_t kWidth>
inline void summed_row_fixed(const SummedGradient& summed, int64_t v, float* buffer, FloatVec* g) {
  constexpr int64_t kVecs = kWidth / kLanes;
  if (summed.column_stride == 1) {
    const int64_t begin = summed.occurrence_start[v], end = summed.occurrence_start[v + 1];
    const float* src = summed.grad + summed.occurrences[begin] * summed.row_stride;
    for (int64_t i = 0; i < kVecs; ++i) g[i] = load_vec(src + kLanes * i);
    for (int64_t j = begin + 1; j < end; ++j) {
      src = summed.grad + summed.occurrences[j] * summed.row_stride;
      for (int64_t i = 0; i < kVecs; ++i) g[i] += load_vec(src + kLanes * i);
    }
  } else {
    summed.row(v, buffer);
    for (int64_t i = 0; i < kVecs; ++i) g[i] = load_vec(buffer + kLanes * i);
  }
}

// kRows rows' share of a block's backward: grad_rows[r][q] = P_q . G_r (d dot products per row) and
// grad_projection[q] += sum_r e_r[q] G_r, with G_r summed in registers and each load of P_q and each update of
// grad_projection's row q serving all kRows rows.
template <int64_t kWidth, int64_t kRows>
inline void rows_backward_fixed(const SummedGradient& summed, int64_t first, const float* e, const float* P,
                                int64_t d, float* grad_rows, float* grad_projection) {
  constexpr int64_t kVecs = kWidth / kLanes;
  FloatVec g[kRows][kVecs];
  float buffer[kWidth];
  for (int64_t r = 0; r < kRows; ++r) summed_row_fixed<kWidth>(summed, first + r, buffer, g[r]);
  for (int64_t q = 0; q < d; ++q) {
    FloatVec dot[kRows];
    FloatVec p = load_vec(P + q * kWidth);
    for (int64_t r = 0; r < kRows; ++r) dot[r] = p * g[r][0];
    for (int64_t i = 1; i < kVecs; ++i) {
      p = load_vec(P + q * kWidth + kLanes * i);
      for (int64_t r = 0; r < kRows; ++r) dot[r] += p * g[r][i];
    }
    for (int64_t r = 0; r < kRows; ++r) grad_rows[r * d + q] = sum_lanes(dot[r]);
    float* gp = grad_projection + q * kWidth;
    for (int64_t i = 0; i < kVecs; ++i) {
      FloatVec update = e[q] * g[0][i];
      for (int64_t r = 1; r < kRows; ++r) update += e[r * d + q] * g[r][i];
      store_vec(gp + kLanes * i, load_vec(gp + kLanes * i) + update);
    }
  }
}

// One block's backward at a compile-time width W over its m distinct rows first, first + 1, ...: grad_rows (m x d)
// = G P^T and grad_projection (d x W, zeroed by the caller) += rows^T G, where G (m x W) is the summed output
// gradient (each row summed in registers as it is needed, never stored) and rows (m x d) the gathered E_i rows.
// Rows go rows_per_pass<W>() at a time.
template <int64_t kWidth>
void block_backward_fixed(const SummedGradient& summed, int64_t first, const float* rows, const float* P, int64_t m,
                          int64_t d, float* grad_rows, float* grad_projection) {
  constexpr int64_t kRows = rows_per_pass<kWidth>();
  int64_t u = 0;
  for (; u + kRows <= m; u += kRows) {
    rows_backward_fixed<kWidth, kRows>(summed, first + u, rows + u * d, P, d, grad_rows + u * d, grad_projection);
  }
  for (; u < m; ++u) {
    rows_backward_fixed<kWidth, 1>(summed, first + u, rows + u * d, P, d, grad_rows + u * d, grad_projection);
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

// One block of the flat parameters: its rows E_i (n_i x d_i, row-major) are the elements row_start ...
// row_start + n_i d_i - 1 of the flat rows; its projection P_i (d_i x D, row-major) starts at element
// projection_start of the flat projections, or it has none (identity: d_i == D, projection_start == -1).
struct Block {
  int64_t rows, dim, row_start, projection_start;
  bool identity() const { return projection_start < 0; }
};

// The blocks of a layer whose block boundaries are `offsets` (k + 1 positions) at dims d_i and output width D,
// checking that the flat parameters hold exactly sum_i n_i d_i and sum_{d_i != D} d_i D values.
std::vector<Block> block_layout(const at::Tensor& offsets_t, const std::vector<int64_t>& dims, int64_t D,
                                int64_t row_numel, int64_t projection_numel) {
  const int64_t k = static_cast<int64_t>(dims.size());
  EMBREG_CHECK(k >= 1 && offsets_t.numel() == k + 1 && offsets_t.scalar_type() == at::kLong,
               "embreg md kernel: offsets must be k + 1 = ", k + 1, " int64 positions");
  const int64_t* offsets = offsets_t.data_ptr<int64_t>();
  std::vector<Block> blocks;
  blocks.reserve(k);
  int64_t row_start = 0, projection_start = 0;
  for (int64_t b = 0; b < k; ++b) {
    const int64_t n = offsets[b + 1] - offsets[b], d = dims[b];
    EMBREG_CHECK(d >= 1 && d <= D, "embreg md kernel: block ", b, " has dim ", d, "; valid range is [1, ", D, "]");
    blocks.push_back(Block{n, d, row_start, d == D ? -1 : projection_start});
    row_start += n * d;
    if (d != D) projection_start += d * D;
  }
  EMBREG_CHECK(row_start == row_numel, "embreg md kernel: the flat rows hold ", row_numel, " values; the blocks need ",
               row_start);
  EMBREG_CHECK(projection_start == projection_numel, "embreg md kernel: the flat projections hold ", projection_numel,
               " values; the blocks need ", projection_start);
  return blocks;
}

// What the backward needs from the forward besides the gathered rows, in one int64 tensor (one allocation and
// one saved variable instead of four tensors, a list and two saved scalars): [U, k, sparse, row_numel,
// occurrence_start (U + 1), occurrences (B), local (U), bounds (k + 1), layout (4 k)]. U distinct rows, grouped
// by block: the ids of distinct row v are occurrences[occurrence_start[v] ... occurrence_start[v + 1]), in order;
// local[v] is its row within its block; block i's distinct rows are [bounds[i], bounds[i + 1]); layout holds each
// block's (rows, dim, row_start, projection_start); sparse (0 or 1) says whether the flat rows get a sparse
// gradient, row_numel is their number of values.
struct Bookkeeping {
  static constexpr int64_t kHeader = 4;
  int64_t distinct, k;
  bool sparse;
  int64_t row_numel;
  int64_t *occurrence_start, *occurrences, *local, *bounds, *layout;

  static int64_t numel(int64_t distinct, int64_t n, int64_t k) {
    return kHeader + (distinct + 1) + n + distinct + (k + 1) + 4 * k;
  }

  // The view of a filled buffer of numel(...) values, for a batch of n ids.
  Bookkeeping(int64_t* base, int64_t n)
      : distinct(base[0]), k(base[1]), sparse(base[2] != 0), row_numel(base[3]), occurrence_start(base + kHeader),
        occurrences(occurrence_start + distinct + 1), local(occurrences + n), bounds(local + distinct),
        layout(bounds + k + 1) {}

  // The view of a fresh buffer of numel(distinct, n, k) values, its header written.
  static Bookkeeping start(int64_t* base, int64_t distinct, int64_t n, int64_t k, bool sparse, int64_t row_numel) {
    base[0] = distinct;
    base[1] = k;
    base[2] = sparse ? 1 : 0;
    base[3] = row_numel;
    return Bookkeeping(base, n);
  }

  std::vector<Block> blocks() const {
    std::vector<Block> out;
    for (int64_t b = 0; b < k; ++b) {
      const int64_t* l = layout + 4 * b;
      out.push_back(Block{l[0], l[1], l[2], l[3]});
    }
    return out;
  }
};

// ids (B values, contiguous int64, any shape); index_map (N) int32/int64 or empty; offsets (k + 1) int64; the
// blocks' layout in the flat rows and flat projections (float32); sparse: the flat rows' gradient is to be
// sparse. Returns out (B, D), allocated with shape out_shape (the ids' shape, then D); the bookkeeping (see
// Bookkeeping); and rows (sum_i U_i d_i) float32 (the gathered distinct rows, block by block, for the backward).
std::vector<at::Tensor> md_forward(const at::Tensor& ids, const at::Tensor& index_map, const at::Tensor& offsets_t,
                                   const std::vector<Block>& blocks, const at::Tensor& flat_rows,
                                   const at::Tensor& flat_projections, int64_t out_dim,
                                   const std::vector<int64_t>& out_shape, bool sparse) {
  const int64_t n = ids.numel();
  const int64_t k = static_cast<int64_t>(blocks.size());
  const int64_t* offsets = offsets_t.data_ptr<int64_t>();
  const int64_t num_rows = offsets[k];
  const float* E_all = flat_rows.data_ptr<float>();
  const float* P_all = flat_projections.numel() > 0 ? flat_projections.data_ptr<float>() : nullptr;
  EMBREG_CHECK(n < std::numeric_limits<int32_t>::max(), "embreg md kernel: batch of ", n, " ids is too large");
  EMBREG_CHECK(num_rows < std::numeric_limits<int32_t>::max(),
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
    EMBREG_CHECK(id >= 0 && id < num_rows, "embreg md kernel: found id ", id, "; valid range is [0, ", num_rows, ")");
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
  auto bookkeeping_t = at::empty({Bookkeeping::numel(num_distinct, n, k)}, ids.options());
  const Bookkeeping kept =
      Bookkeeping::start(bookkeeping_t.data_ptr<int64_t>(), num_distinct, n, k, sparse, flat_rows.numel());
  int64_t* local = kept.local;
  int64_t* occurrence_start = kept.occurrence_start;
  int64_t* occurrences = kept.occurrences;
  std::copy(bounds.begin(), bounds.end(), kept.bounds);
  for (int64_t b = 0; b < k; ++b) {
    int64_t* entry = kept.layout + 4 * b;
    entry[0] = blocks[b].rows;
    entry[1] = blocks[b].dim;
    entry[2] = blocks[b].row_start;
    entry[3] = blocks[b].projection_start;
  }
  for (int64_t u = 0; u < num_distinct; ++u) {
    const int64_t v = cursor[block[u]]++;
    grouped[u] = static_cast<int32_t>(v);
    local[v] = distinct[u] - offsets[block[u]];
    occurrence_start[v + 1] = count[u];
  }
  occurrence_start[0] = 0;
  for (int64_t v = 0; v < num_distinct; ++v) occurrence_start[v + 1] += occurrence_start[v];
  std::vector<int64_t> fill(occurrence_start, occurrence_start + num_distinct);
  for (int64_t j = 0; j < n; ++j) occurrences[fill[grouped[raw_inverse[j]]]++] = j;

  // gather the distinct rows of every block into one packed buffer
  std::vector<int64_t> row_start(k + 1, 0);
  for (int64_t b = 0; b < k; ++b) row_start[b + 1] = row_start[b] + (bounds[b + 1] - bounds[b]) * blocks[b].dim;
  auto rows_t = at::empty({row_start[k]}, flat_rows.options());
  float* rows = rows_t.data_ptr<float>();
  for (int64_t b = 0; b < k; ++b) {
    const int64_t d = blocks[b].dim, start = bounds[b], stop = bounds[b + 1];
    const float* E = E_all + blocks[b].row_start;
    float* dst = rows + row_start[b];
    for (int64_t v = start; v < stop; ++v) {
      if (v + kPrefetchAhead < stop) __builtin_prefetch(E + local[v + kPrefetchAhead] * d);
      std::memcpy(dst + (v - start) * d, E + local[v] * d, d * sizeof(float));
    }
  }

  // project each distinct row once, into the output row of its first occurrence; copy it to the others
  const int64_t D = out_dim;
  auto out_t = at::empty(out_shape, flat_rows.options());  // (..., D): the ids' shape, so the caller needs no view
  float* out = out_t.data_ptr<float>();
  for (int64_t b = 0; b < k; ++b) {
    const int64_t d = blocks[b].dim;
    const float* P = blocks[b].identity() ? nullptr : P_all + blocks[b].projection_start;
    const float* src = rows + row_start[b];
    auto first_output = [&](int64_t v) { return out + occurrences[occurrence_start[v]] * D; };
    const bool fixed = P != nullptr && with_fixed_width(D, [&](auto W) {
      constexpr int64_t kRows = rows_per_pass<W()>();
      int64_t v = bounds[b];
      for (; v + kRows <= bounds[b + 1]; v += kRows) {
        float* outputs[kRows];
        for (int64_t r = 0; r < kRows; ++r) outputs[r] = first_output(v + r);
        project_rows_fixed<W(), kRows>(src + (v - bounds[b]) * d, P, d, outputs);
      }
      for (; v < bounds[b + 1]; ++v) {
        float* o = first_output(v);
        project_rows_fixed<W(), 1>(src + (v - bounds[b]) * d, P, d, &o);
      }
    });
    if (!fixed) {
      for (int64_t v = bounds[b]; v < bounds[b + 1]; ++v) {
        const float* e = src + (v - bounds[b]) * d;
        if (P == nullptr) {
          std::memcpy(first_output(v), e, D * sizeof(float));
        } else {
          project_row(e, P, d, D, first_output(v));
        }
      }
    }
  }
  for (int64_t v = 0; v < num_distinct; ++v) {
    const float* row = out + occurrences[occurrence_start[v]] * D;
    for (int64_t i = occurrence_start[v] + 1; i < occurrence_start[v + 1]; ++i) {
      std::memcpy(out + occurrences[i] * D, row, D * sizeof(float));
    }
  }

  return {out_t, bookkeeping_t, rows_t};
}

// A float32 CPU tensor of n zeros: at::empty and a memset, without at::zeros's dispatched fill (a few
// microseconds of a small batch's step).
at::Tensor zeros_1d(int64_t n, const at::TensorOptions& options) {
  at::Tensor out = at::empty({n}, options);
  if (n > 0) std::memset(out.data_ptr<float>(), 0, n * sizeof(float));
  return out;
}

// grad_out (B, D) float32, any strides, the forward's bookkeeping and gathered rows, and the flat projections
// (the tables' values are not needed: the gathered rows are). Returns the gradient of the flat rows (sparse
// COO (row_numel) with one entry per value of a distinct row, when the bookkeeping says sparse; else dense) and
// of the flat projections (dense; zero for blocks no id fell in; undefined when there are none).
std::vector<at::Tensor> md_backward(const at::Tensor& grad_out, const at::Tensor& bookkeeping_t,
                                    const at::Tensor& rows_t, const at::Tensor& flat_projections) {
  const int64_t D = grad_out.size(1);
  const Bookkeeping kept(bookkeeping_t.data_ptr<int64_t>(), grad_out.size(0));
  const std::vector<Block> blocks = kept.blocks();
  const int64_t k = kept.k, row_numel = kept.row_numel;
  const int64_t* bounds = kept.bounds;
  const int64_t* local = kept.local;
  const SummedGradient summed{grad_out.data_ptr<float>(), grad_out.stride(0), grad_out.stride(1), D,
                              kept.occurrence_start, kept.occurrences};
  const auto options = grad_out.options();
  // the row gradients' values, packed as the gathered rows are (block by block, U_i x d_i each)
  at::Tensor values = at::empty({rows_t.numel()}, options);
  at::Tensor grad_projections = zeros_1d(flat_projections.numel(), options);
  const float* gathered = rows_t.data_ptr<float>();
  float* value_ptr = values.data_ptr<float>();
  int64_t row_offset = 0;
  for (int64_t b = 0; b < k; ++b) {
    const int64_t start = bounds[b], count = bounds[b + 1] - start, d = blocks[b].dim;
    if (count == 0) continue;  // no id fell in this block: its gradients stay zero
    float* grad_rows = value_ptr + row_offset;
    if (blocks[b].identity()) {
      for (int64_t v = 0; v < count; ++v) summed.row(start + v, grad_rows + v * D);
    } else {
      const int64_t p0 = blocks[b].projection_start;
      const float* P = flat_projections.data_ptr<float>() + p0;
      float* grad_projection = grad_projections.data_ptr<float>() + p0;
      const bool fixed = with_fixed_width(D, [&](auto W) {
        block_backward_fixed<W()>(summed, start, gathered + row_offset, P, count, d, grad_rows, grad_projection);
      });
      if (!fixed) {  // other widths: two matrix products over the block's summed gradient G (count x D)
        at::Tensor G = at::empty({count, D}, options);
        for (int64_t v = 0; v < count; ++v) summed.row(start + v, G.data_ptr<float>() + v * D);
        const at::Tensor P_t = flat_projections.narrow(0, p0, d * D).view({d, D});
        at::Tensor grad_rows_t = values.narrow(0, row_offset, count * d).view({count, d});
        at::Tensor grad_projection_t = grad_projections.narrow(0, p0, d * D).view({d, D});
        at::mm_out(grad_rows_t, G, P_t.t());
        at::mm_out(grad_projection_t, rows_t.narrow(0, row_offset, count * d).view({count, d}).t(), G);
      }
    }
    row_offset += count * d;
  }

  at::Tensor grad_rows;
  if (kept.sparse) {  // one index per value: row_start_i + local_u d_i + q
    at::Tensor indices = at::empty({1, values.numel()}, bookkeeping_t.options());
    int64_t* index = indices.data_ptr<int64_t>();
    for (int64_t b = 0; b < k; ++b) {
      const int64_t d = blocks[b].dim, first = blocks[b].row_start;
      for (int64_t v = bounds[b]; v < bounds[b + 1]; ++v) {
        const int64_t base = first + local[v] * d;
        for (int64_t q = 0; q < d; ++q) *index++ = base + q;
      }
    }
    grad_rows = at::_sparse_coo_tensor_unsafe(indices, values, {row_numel}, options.layout(at::kSparse));
  } else {
    grad_rows = zeros_1d(row_numel, options);
    float* dense = grad_rows.data_ptr<float>();
    const float* src = value_ptr;
    for (int64_t b = 0; b < k; ++b) {
      const int64_t d = blocks[b].dim;
      float* table = dense + blocks[b].row_start;
      for (int64_t v = bounds[b]; v < bounds[b + 1]; ++v, src += d) {
        std::memcpy(table + local[v] * d, src, d * sizeof(float));
      }
    }
  }
  return {grad_rows, flat_projections.numel() > 0 ? grad_projections : at::Tensor()};
}

// The autograd node. Inputs: ids (contiguous int64, any shape), index_map, offsets, sparse, dims, out_dim, the
// output's shape (the ids' shape, then D), the flat rows and the flat projections; gradients flow to the two flat
// parameters only.
struct FusedLookup : public torch::autograd::Function<FusedLookup> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& ids, const at::Tensor& index_map,
                            const at::Tensor& offsets, bool sparse, const std::vector<int64_t>& dims,
                            int64_t out_dim, const std::vector<int64_t>& out_shape, const at::Tensor& flat_rows,
                            const at::Tensor& flat_projections) {
    const std::vector<Block> blocks = block_layout(offsets, dims, out_dim, flat_rows.numel(), flat_projections.numel());
    std::vector<at::Tensor> outputs = md_forward(ids, index_map, offsets, blocks, flat_rows, flat_projections, out_dim,
                                                 out_shape, sparse);
    // the backward reads the gathered rows, not the tables, so only the projections are saved
    ctx->save_for_backward({outputs[1], outputs[2], flat_projections});
    return outputs[0];
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    EMBREG_CHECK(!at::GradMode::is_enabled(),
                 "embreg's fused mixed-dimension lookup gives first derivatives only; for a second derivative "
                 "(create_graph=True) use embreg.embeddings.functional.mixed_dimension_lookup_reference");
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    const at::Tensor& upstream = grad_outputs[0];  // (..., D): (B, D) as it is, else a view where it can be
    const at::Tensor grad_out = upstream.dim() == 2 ? upstream : upstream.reshape({-1, upstream.size(-1)});
    std::vector<at::Tensor> grads = md_backward(grad_out, saved[0], saved[1], saved[2]);
    // one entry per forward argument: ids, index_map, offsets, sparse, dims, out_dim, out_shape, then the two
    // parameters (whose input edges are 3 and 4: only tensor arguments have edges)
    torch::autograd::variable_list result(9);
    if (ctx->needs_input_grad(3)) result[7] = grads[0];
    if (ctx->needs_input_grad(4)) result[8] = grads[1];
    return result;
  }
};

// Whether the node can serve these parameters: 1-d, float32, contiguous, on the CPU.
bool tables_supported(const at::Tensor& flat_rows, const at::Tensor& flat_projections) {
  auto supported = [](const at::Tensor& t) {
    return t.scalar_type() == at::kFloat && t.device().is_cpu() && t.is_contiguous() && t.dim() == 1;
  };
  return supported(flat_rows) && supported(flat_projections);
}

// Whether the node serves these ids: at least one, on the CPU, of an id dtype the layer accepts (int64, int32,
// int16, int8, uint8; others take the tensor ops, whose checks reject them with the library's error).
bool ids_supported(const at::Tensor& ids) {
  switch (ids.scalar_type()) {
    case at::kLong:
    case at::kInt:
    case at::kShort:
    case at::kChar:
    case at::kByte:
      return ids.device().is_cpu() && ids.numel() > 0;
    default:
      return false;
  }
}

// The lookup of ids of any shape -> (..., D), or None where the node does not serve the ids or the parameters
// (the caller then takes the tensor ops; it makes no check of its own, so a step pays for none in Python).
// index_map: None or (N) integer; flat_projections: None when every block is at d_i == D; dims: d_i per block.
std::optional<at::Tensor> md_lookup(const at::Tensor& ids, const std::optional<at::Tensor>& index_map,
                                    const at::Tensor& offsets, bool sparse, const at::Tensor& flat_rows,
                                    const std::optional<at::Tensor>& flat_projections,
                                    const std::vector<int64_t>& dims, int64_t out_dim) {
  if (!ids_supported(ids)) return std::nullopt;
  const at::Tensor projections = flat_projections.has_value() && flat_projections->defined()
                                     ? *flat_projections
                                     : at::empty({0}, flat_rows.options());  // none: every block is identity
  if (!tables_supported(flat_rows, projections)) return std::nullopt;
  // the kernel reads the ids as one contiguous int64 array of any shape (no copy or view when they are one)
  const at::Tensor flat = ids.scalar_type() == at::kLong && ids.is_contiguous() ? ids : ids.to(at::kLong).contiguous();
  const bool mapped = index_map.has_value() && index_map->defined();
  const at::Tensor map = !mapped ? at::empty({0}, flat.options())  // empty: the ids are positions
                         : index_map->scalar_type() == at::kInt ? index_map->contiguous()
                                                                : index_map->to(at::kLong).contiguous();
  std::vector<int64_t> shape = ids.sizes().vec();
  shape.push_back(out_dim);
  return FusedLookup::apply(flat, map, offsets, sparse, dims, out_dim, shape, flat_rows, projections);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("lookup", EMBREG_GUARDED(md_lookup), "mixed-dimension lookup as one autograd node (see md_lookup.cpp)");
  m.def("tables_supported", EMBREG_GUARDED(tables_supported), "whether the node can serve these flat parameters");
}
