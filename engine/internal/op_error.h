#pragma once

// OpError: one failure of one op, shared by every var and op it poisons.
//
// State model. An OpError is made when an op fails (its function throws or
// passes an error to on_complete) and starts unreported. It travels by
// reference: the failed op's mutable vars carry it, ops granted such a var
// inherit it, and ops skipped for it pass the same record on. The first
// wait that sees it (WaitForVar, Throw or WaitForAll) marks it reported and
// rethrows it; from then on it poisons nothing: vars that still hold it are
// read as clean, and an op that inherited it runs. Marking is one atomic
// exchange, so of several waits racing for one error exactly one reports it.
//
// ErrorRef is an intrusive counted reference (one word, so that a Var still
// fits one cache line); copies may be made and dropped on any thread.
//
// Thread safety: thread-safe. The exception and op name are constant.
//
// Memory ordering: MarkReported is acq_rel and reported() acquire, so a
// thread that sees the error reported also sees everything the reporting
// thread did before reporting it.

#include <atomic>
#include <exception>
#include <string>
#include <string_view>
#include <utility>

namespace ember::engine::internal {

class OpError {
 public:
  OpError(std::exception_ptr exception, std::string_view op)
      : exception_(std::move(exception)), op_(op) {}
  OpError(const OpError&) = delete;
  OpError& operator=(const OpError&) = delete;

  [[nodiscard]] const std::exception_ptr& exception() const { return exception_; }
  [[nodiscard]] const std::string& op() const { return op_; }

  [[nodiscard]] bool reported() const { return reported_.load(std::memory_order_acquire); }
  // Marks the error reported; true only for the call that did it.
  [[nodiscard]] bool MarkReported() { return !reported_.exchange(true, std::memory_order_acq_rel); }

 private:
  friend class ErrorRef;
  const std::exception_ptr exception_;
  const std::string op_;
  std::atomic<bool> reported_{false};
  std::atomic<int> refs_{0};
};

class ErrorRef {
 public:
  ErrorRef() = default;
  explicit ErrorRef(OpError* error) : error_(error) { Ref(); }
  ErrorRef(const ErrorRef& other) : error_(other.error_) { Ref(); }
  ErrorRef(ErrorRef&& other) noexcept : error_(std::exchange(other.error_, nullptr)) {}
  ErrorRef& operator=(ErrorRef other) noexcept {
    std::swap(error_, other.error_);
    return *this;
  }
  ~ErrorRef() { Unref(); }

  // A new unreported error of op `op`.
  static ErrorRef Make(std::exception_ptr exception, std::string_view op) {
    return ErrorRef(new OpError(std::move(exception), op));
  }

  [[nodiscard]] OpError* get() const { return error_; }
  OpError* operator->() const { return error_; }
  explicit operator bool() const { return error_ != nullptr; }
  // True for an error that still poisons: present and not yet reported.
  [[nodiscard]] bool live() const { return error_ != nullptr && !error_->reported(); }
  friend bool operator==(const ErrorRef& a, const ErrorRef& b) { return a.error_ == b.error_; }

 private:
  void Ref() const {
    if (error_ != nullptr) error_->refs_.fetch_add(1, std::memory_order_relaxed);
  }
  void Unref() const {
    if (error_ != nullptr && error_->refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      delete error_;
    }
  }

  OpError* error_ = nullptr;
};

}  // namespace ember::engine::internal
