// Fused CPU samplers for Stochastic Shared Embeddings (SSE).
//
// Paper: sse-stochastic-shared-embeddings.txt, eq. 5 (SSE-SE) and eq. 3 (SSE-Graph).
// The same laws as embreg/sse/functional.py, in one pass over the ids:
//
//   * each id j is kept with probability 1 - p, otherwise swapped;
//   * SSE-SE swaps j for a uniform id among the other N - 1;
//   * SSE-Graph swaps j for a uniform neighbour with probability
//     a_j = (rho - 1) deg_j / (rho deg_j + N - 1 - deg_j), else for a uniform other id,
//     which is eq. 3 exactly normalised (see functional.sse_graph for the derivation).
//
// Swap positions come from the geometric gaps of the Bernoulli(p) process (one draw per swap, not per id) for
// p <= 0.5, and from one uniform per id above. Randomness: the ids are cut into fixed chunks of kChunk ids; the
// caller's torch CPU generator draws one 64-bit seed per chunk, and each chunk runs its own xoshiro256**
// stream from that seed. The output therefore depends on the generator state only, not on the thread count,
// and the torch generator state (saved in checkpoints) fully determines the stream.
//
// Every id is range-checked in the copy pass (an error names the first bad value and the valid range).

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/csrc/utils/pybind.h>

#include "embreg_errors.h"

#include <cmath>
#include <cstdint>
#include <mutex>
#include <vector>

namespace {

constexpr int64_t kChunk = int64_t{1} << 14;
constexpr double kGeometricMaxP = 0.5;
constexpr double kTwoPow53Inv = 1.0 / 9007199254740992.0;  // 2^-53

// xoshiro256** (Blackman and Vigna, 2018), seeded through splitmix64.
struct Xoshiro256 {
  uint64_t s[4];

  explicit Xoshiro256(uint64_t seed) {
    for (auto& word : s) {
      seed += 0x9E3779B97F4A7C15ULL;
      uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
      word = z ^ (z >> 31);
    }
  }

  static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

  inline uint64_t next() {
    const uint64_t result = rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
  }

  // Uniform on [0, 1) with 53 random bits.
  inline double uniform() { return static_cast<double>(next() >> 11) * kTwoPow53Inv; }

  // Uniform integer on [0, bound), bound >= 1, by Lemire's multiply-shift (the high word of next() * bound);
  // no value is more likely than another by more than bound / 2^64.
  inline int64_t below(int64_t bound) { return scale(next(), bound); }

  // The high word of bits * bound: maps 64 random bits to [0, bound).
  static inline int64_t scale(uint64_t bits, int64_t bound) {
    const unsigned __int128 product = static_cast<unsigned __int128>(bits) * static_cast<uint64_t>(bound);
    return static_cast<int64_t>(product >> 64);
  }
};

std::vector<uint64_t> chunk_seeds(int64_t count, c10::optional<at::Generator> generator) {
  auto* gen = at::get_generator_or_default<at::CPUGeneratorImpl>(generator, at::detail::getDefaultCPUGenerator());
  std::lock_guard<std::mutex> lock(gen->mutex_);
  std::vector<uint64_t> seeds(static_cast<size_t>(count));
  for (auto& seed : seeds) seed = gen->random64();
  return seeds;
}

// Calls swap(position) for each position in [begin, end) chosen independently with probability p.
template <typename Swap>
inline void for_each_swap(int64_t begin, int64_t end, double p, Xoshiro256& rng, Swap&& swap) {
  if (p <= 0.0) return;
  if (p >= 1.0) {
    for (int64_t i = begin; i < end; ++i) swap(i);
  } else if (p > kGeometricMaxP) {
    for (int64_t i = begin; i < end; ++i)
      if (rng.uniform() < p) swap(i);
  } else {
    // failures before the next success ~ Geometric(p) on {0, 1, ...}: floor(log(U) / log(1 - p)), U in (0, 1]
    const double inv_log_keep = 1.0 / std::log1p(-p);
    int64_t position = begin - 1;
    while (true) {
      const double gap = std::floor(std::log(1.0 - rng.uniform()) * inv_log_keep);
      if (gap >= static_cast<double>(end - position - 1)) break;
      position += static_cast<int64_t>(gap) + 1;
      swap(position);
    }
  }
}

// Copies ids into out and returns the first id outside [0, n), or -1 when all are valid.
// The check is one unsigned comparison (a negative id wraps to a huge value) folded with a branch-free OR, so
// the compiler vectorises the loop: it runs at about the speed of a plain copy.
template <typename T>
inline int64_t copy_checked(const T* ids, T* out, int64_t begin, int64_t end, int64_t n) {
  const uint64_t limit = static_cast<uint64_t>(n);
  uint64_t bad = 0;
  for (int64_t i = begin; i < end; ++i) {
    const T v = ids[i];
    out[i] = v;
    bad |= static_cast<uint64_t>(static_cast<uint64_t>(static_cast<int64_t>(v)) >= limit);
  }
  if (bad == 0) return -1;
  for (int64_t i = begin; i < end; ++i)
    if (static_cast<int64_t>(ids[i]) < 0 || static_cast<int64_t>(ids[i]) >= n) return i;
  return -1;
}

template <typename ChunkFn>
at::Tensor run_chunks(const at::Tensor& ids, int64_t n, c10::optional<at::Generator> generator, ChunkFn&& fn) {
  EMBREG_CHECK(ids.device().is_cpu(), "embreg SSE kernel: ids must be on the CPU, got ", ids.device());
  const at::Tensor input = ids.contiguous();
  at::Tensor out = at::empty_like(input, at::MemoryFormat::Contiguous);
  const int64_t numel = input.numel();
  if (numel == 0) return out;
  const int64_t chunks = (numel + kChunk - 1) / kChunk;
  const std::vector<uint64_t> seeds = chunk_seeds(chunks, generator);
  std::vector<int64_t> bad(static_cast<size_t>(chunks), -1);
  AT_DISPATCH_INTEGRAL_TYPES(input.scalar_type(), "embreg_sse_kernel", [&] {
    const scalar_t* src = input.data_ptr<scalar_t>();
    scalar_t* dst = out.data_ptr<scalar_t>();
    at::parallel_for(0, chunks, 1, [&](int64_t first, int64_t last) {
      for (int64_t c = first; c < last; ++c) {
        const int64_t begin = c * kChunk;
        const int64_t end = std::min(numel, begin + kChunk);
        bad[c] = copy_checked(src, dst, begin, end, n);
        if (bad[c] >= 0) continue;
        Xoshiro256 rng(seeds[c]);
        fn(dst, begin, end, rng);
      }
    });
    for (int64_t c = 0; c < chunks; ++c)
      EMBREG_CHECK(bad[c] < 0, "ids out of range: found ", static_cast<int64_t>(src[bad[c]]),
                   "; valid range is [0, ", n, ")");
  });
  return out;
}

at::Tensor sse_se(const at::Tensor& ids, int64_t num_embeddings, double p, c10::optional<at::Generator> generator) {
  EMBREG_CHECK(num_embeddings >= 2, "num_embeddings must be >= 2, got ", num_embeddings);
  EMBREG_CHECK(p >= 0.0 && p <= 1.0, "p must lie in [0, 1], got ", p);
  const int64_t others = num_embeddings - 1;
  return run_chunks(ids, num_embeddings, generator, [&](auto* dst, int64_t begin, int64_t end, Xoshiro256& rng) {
    using T = std::remove_pointer_t<decltype(dst)>;
    for_each_swap(begin, end, p, rng, [&](int64_t i) {
      const int64_t current = static_cast<int64_t>(dst[i]);
      const int64_t rank = rng.below(others);
      dst[i] = static_cast<T>(rank + (rank >= current ? 1 : 0));
    });
  });
}

at::Tensor sse_graph(const at::Tensor& ids, const at::Tensor& indptr, const at::Tensor& indices, double p, double rho,
                     c10::optional<at::Generator> generator) {
  EMBREG_CHECK(indptr.scalar_type() == at::kLong && indices.scalar_type() == at::kLong,
               "graph indptr and indices must be int64");
  EMBREG_CHECK(indptr.is_contiguous() && indices.is_contiguous(), "graph indptr and indices must be contiguous");
  EMBREG_CHECK(p >= 0.0 && p <= 1.0, "p must lie in [0, 1], got ", p);
  EMBREG_CHECK(rho >= 1.0, "rho must be >= 1, got ", rho);
  const int64_t n = indptr.numel() - 1;
  EMBREG_CHECK(n >= 2, "the graph needs at least 2 nodes, got ", n);
  const int64_t* row = indptr.data_ptr<int64_t>();
  const int64_t* col = indices.data_ptr<int64_t>();
  const double extra_per_neighbour = rho - 1.0;
  const double others = static_cast<double>(n - 1);
  return run_chunks(ids, n, generator, [&](auto* dst, int64_t begin, int64_t end, Xoshiro256& rng) {
    using T = std::remove_pointer_t<decltype(dst)>;
    // Swaps with a neighbour candidate are resolved in batches: the random draws happen in swap order as they
    // are made, but the neighbour lookups (a random read of the CSR columns, often a cache miss) are deferred
    // and issued together, so the memory reads overlap. Positions ascend, so no deferred write is read early.
    constexpr int kBatch = 64;
    int64_t position[kBatch], slot[kBatch], other[kBatch];
    bool to_neighbour[kBatch];
    int pending = 0;
    auto flush = [&] {
      for (int k = 0; k < pending; ++k) {
        const int64_t neighbour = col[slot[k]];
        dst[position[k]] = static_cast<T>(to_neighbour[k] ? neighbour : other[k]);
      }
      pending = 0;
    };
    for_each_swap(begin, end, p, rng, [&](int64_t i) {
      const int64_t current = static_cast<int64_t>(dst[i]);
      const int64_t degree = row[current + 1] - row[current];
      if (degree > 0 && extra_per_neighbour > 0.0) {
        const double extra = extra_per_neighbour * static_cast<double>(degree);
        // neighbour branch with probability a_j = extra / (extra + N - 1); either branch then uses one more draw,
        // so both candidates come from the same 64 bits and a select picks one
        to_neighbour[pending] = rng.uniform() * (extra + others) < extra;
        const uint64_t bits = rng.next();
        const int64_t rank = Xoshiro256::scale(bits, n - 1);
        position[pending] = i;
        slot[pending] = row[current] + Xoshiro256::scale(bits, degree);
        other[pending] = rank + (rank >= current ? 1 : 0);
        if (++pending == kBatch) flush();
        return;
      }
      const int64_t rank = rng.below(n - 1);
      dst[i] = static_cast<T>(rank + (rank >= current ? 1 : 0));
    });
    flush();
  });
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "embreg: fused CPU samplers for SSE-SE (eq. 5) and SSE-Graph (eq. 3)";
  m.def("sse_se", EMBREG_GUARDED(sse_se), "SSE-SE on CPU ids", pybind11::arg("ids"), pybind11::arg("num_embeddings"),
        pybind11::arg("p"), pybind11::arg("generator") = pybind11::none());
  m.def("sse_graph", EMBREG_GUARDED(sse_graph), "SSE-Graph on CPU ids", pybind11::arg("ids"), pybind11::arg("indptr"),
        pybind11::arg("indices"), pybind11::arg("p"), pybind11::arg("rho"),
        pybind11::arg("generator") = pybind11::none());
}
