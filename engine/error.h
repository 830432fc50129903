#pragma once

// Ember's one exception hierarchy. Every message starts with where it was
// raised, e.g. "[Engine::PushAsync] op 'fc1': ...", and names the offending
// values, so that a log line alone says what went wrong and where.
//
// Exceptions thrown by user op functions are not wrapped: they travel through
// the engine as they were thrown and are rethrown by WaitForVar/WaitForAll.
//
// Thread safety: these are plain values; copies may be used from any thread.

#include <exception>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace ember {

// Error is the base of every exception Ember raises itself.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// InvalidArgument: a caller passed a value that cannot be right (an unknown
// engine name, a stale var handle, a negative worker count).
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

// UsageError: a call that is valid in itself but not at this point (waiting
// from inside an op, completing an op twice, using an engine after fork()).
class UsageError : public Error {
 public:
  using Error::Error;
};

// Unavailable: the request names a resource this process does not have
// (a GPU context on a machine without that GPU).
class Unavailable : public Error {
 public:
  using Error::Error;
};

// CudaError: a CUDA call failed. The message names the call's purpose, the
// CUDA error and the source location of the check.
class CudaError : public Error {
 public:
  using Error::Error;
};

// OpErrors: what one WaitForAll throws when several ops failed since the
// last report. It carries every one of those errors, in the order the ops
// failed, with the name of the op each came from; its message lists them
// ("[Engine::WaitForAll] 2 ops failed since the last report: op 'a': ...;
// op 'b': ..."). A single error is rethrown as it was thrown, not wrapped.
class OpErrors : public Error {
 public:
  OpErrors(const std::string& message, std::vector<std::exception_ptr> errors,
           std::vector<std::string> op_names)
      : Error(message), errors_(std::move(errors)), op_names_(std::move(op_names)) {}

  [[nodiscard]] const std::vector<std::exception_ptr>& errors() const { return errors_; }
  [[nodiscard]] const std::vector<std::string>& op_names() const { return op_names_; }

 private:
  std::vector<std::exception_ptr> errors_;
  std::vector<std::string> op_names_;
};

}  // namespace ember
