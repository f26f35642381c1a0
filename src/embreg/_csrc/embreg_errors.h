// Errors of embreg's C++ kernels, as Python sees them.
//
// Kernels check their input with EMBREG_CHECK, never TORCH_CHECK: a failed check throws std::runtime_error, which
// reaches Python as RuntimeError, and its message is built by embreg::message, which formats numbers with
// std::to_string and snprintf, never through an iostream.
//
// Why: on one host (an NVIDIA H200 machine, Ubuntu 24.04, PyTorch 2.11.0+cu130, kernels built by its g++ 13.3)
// writing an integer to a std::ostream inside an extension crashed the process (SIGSEGV). The native backtrace
// runs from std::ostream::_M_insert<long>, instantiated in the extension, into a virtual function of another
// locale facet (codecvt<char16_t>::do_unshift), as a lookup of the number-formatting facet under an id that names
// a different facet in the process's locale would. TORCH_CHECK builds its message that way (c10::str), so
// every failed check with a number in its message crashed, with or without an exception crossing pybind11, while
// a std::runtime_error carrying a std::to_string message reached Python as RuntimeError. The test
// tests/test_native_sources.py keeps iostream formatting out of embreg's C++ sources.
//
// Every bound function is also wrapped in Guarded<...>::call, which turns a c10::Error raised by a PyTorch call
// inside the kernel into std::runtime_error carrying its message without the C++ backtrace.
//
// Example:
//   EMBREG_CHECK(id >= 0 && id < n, "found id ", id, "; valid range is [0, ", n, ")");
//   m.def("sse_se", EMBREG_GUARDED(sse_se), ...);
#pragma once

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/Exception.h>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

namespace embreg {
namespace detail {

inline void append(std::string& out, const std::string& text) { out += text; }
inline void append(std::string& out, const char* text) { out += text; }
inline void append(std::string& out, char c) { out += c; }

template <typename T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool> && !std::is_same_v<T, char>,
                                       int> = 0>
inline void append(std::string& out, T value) {
  out += std::to_string(value);
}

// As an ostream writes a double by default (6 significant digits, %g)
inline void append(std::string& out, double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  out += text;
}

inline void append(std::string& out, c10::ScalarType type) { out += c10::toString(type); }
inline void append(std::string& out, const c10::Device& device) { out += device.str(); }

// "[2, 3]", as PyTorch writes sizes
inline void append(std::string& out, c10::IntArrayRef sizes) {
  out += '[';
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(sizes[i]);
  }
  out += ']';
}

}  // namespace detail

// The concatenation of the arguments' texts (strings, characters, integers, doubles, dtypes, devices, sizes).
template <typename... Args>
std::string message(const Args&... args) {
  std::string out;
  (detail::append(out, args), ...);
  return out;
}

}  // namespace embreg

#define EMBREG_CHECK(cond, ...)                                      \
  do {                                                               \
    if (C10_UNLIKELY(!(cond))) {                                     \
      throw std::runtime_error(::embreg::message(__VA_ARGS__));      \
    }                                                                \
  } while (0)

template <auto Fn>
struct Guarded;

template <typename R, typename... Args, R (*Fn)(Args...)>
struct Guarded<Fn> {
  static R call(Args... args) {
    try {
      return Fn(std::forward<Args>(args)...);
    } catch (const c10::Error& error) {
      throw std::runtime_error(error.what_without_backtrace());
    }
  }
};

#define EMBREG_GUARDED(fn) (&Guarded<&fn>::call)
