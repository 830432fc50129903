#pragma once

// Ember's one exception hierarchy. Every message starts with where it was
// raised, e.g. "[Engine::PushAsync] op 'fc1': ...", and names the offending
// values, so that a log line alone says what went wrong and where.
//
// Exceptions thrown by user op functions are not wrapped: they travel through
// the engine as they were thrown and are rethrown by WaitForVar/WaitForAll.
//
// Thread safety: these are plain values; copies may be used from any thread.

#include <stdexcept>
#include <string>

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

}  // namespace ember
