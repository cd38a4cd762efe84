// Shared by core.cpp and cuda.cpp: the C ABI conventions of the trainer's libtorch shim.
//
// * Tensors cross as `torch::Tensor*` (tch's `*mut C_tensor`). Inputs are borrowed; every tensor
//   handed back is a `new at::Tensor` that the Rust side owns (tch::Tensor::from_ptr).
// * Every fallible function returns 0 on success, 1 on a C++ exception; the message is then in
//   tshim_last_error() (thread-local). No exception ever crosses into Rust.
#pragma once

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <exception>
#include <string>

typedef at::Tensor* tensor;
typedef const at::Tensor* ctensor;

// The calling thread's last error message, set by SHIM_TRY.
std::string& tshim_error_slot();

// Runs the body; turns any exception into return code 1 plus a message.
#define SHIM_TRY(...)                                      \
  try {                                                    \
    __VA_ARGS__;                                           \
    return 0;                                              \
  } catch (const c10::Error& e) {                          \
    tshim_error_slot() = e.what_without_backtrace();       \
    return 1;                                              \
  } catch (const std::exception& e) {                      \
    tshim_error_slot() = e.what();                         \
    return 1;                                              \
  } catch (...) {                                          \
    tshim_error_slot() = "unknown C++ exception";          \
    return 1;                                              \
  }
