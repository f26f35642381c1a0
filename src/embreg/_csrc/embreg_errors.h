// Errors of embreg's C++ kernels, as Python sees them.
//
// A c10::Error (TORCH_CHECK) that leaves an extension's function and crosses pybind11's dispatcher crashed the
// process (SIGSEGV) on one host: an NVIDIA H200 machine (a Firecracker VM, Ubuntu 24.04) with PyTorch
// 2.11.0+cu130, its kernels built by the machine's g++ 13.3. On that machine a std::runtime_error thrown from an extension reached Python as a
// RuntimeError, and a c10::Error caught inside the extension (what() included) was fine; a pybind11 exception
// translator did not help, since the crash comes before translators run. So every function a kernel binds is
// wrapped in Guarded<...>::call: it catches c10::Error where it is thrown and rethrows the message alone
// (what_without_backtrace(), as PyTorch's own bindings show it) as std::runtime_error, which reaches Python as
// RuntimeError everywhere.
//
// Example: m.def("sse_se", EMBREG_GUARDED(sse_se), ...);
#pragma once

#include <c10/util/Exception.h>

#include <stdexcept>
#include <utility>

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
