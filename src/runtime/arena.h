// Arena: one 64-byte aligned block of memory that a run context reuses for the activations of every
// run (offsets come from the memory planner). It only grows, and only between runs: Reserve()
// invalidates every pointer into the old block. Not thread-safe; each concurrent run owns one.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>

namespace inferd {

class Arena {
 public:
  static constexpr size_t kAlignment = 64;

  // Makes the block at least `bytes` large (contents are not preserved when it grows). Returns
  // false when the memory is not available (the block is then empty).
  bool Reserve(size_t bytes);

  char* data() const { return data_.get(); }
  size_t capacity() const { return capacity_; }
  bool Contains(const void* p) const {
    const char* c = static_cast<const char*>(p);
    return capacity_ > 0 && c >= data_.get() && c < data_.get() + capacity_;
  }

 private:
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  std::unique_ptr<char, Free> data_;
  size_t capacity_ = 0;
};

}  // namespace inferd
