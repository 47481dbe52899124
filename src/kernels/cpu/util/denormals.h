// Denormals flushed to zero for the extent of a scope (x86 MXCSR FTZ + DAZ; nothing elsewhere).
//
// Why: on Intel cores an SSE/AVX operation whose input or result is denormal (|x| < 1.2e-38)
// takes a microcode assist of ~100 cycles instead of one. Attention makes such values by the
// million: a softmax weight e^(s - max) of a score far below its row's max (a padded key's -1e4,
// or an ordinary spread of scores) is a tiny number, and its product with a value lands below
// FLT_MIN. On an Intel Xeon (family 6, model 167) BERT-base's attention ran 1.9x slower with them
// (`inferd bench --profile`, one thread: 16.5 ms against 8.6 ms of Attention per run); AMD cores
// take no such penalty. What is flushed is below 1.2e-38 in a sum whose softmax weights add up to
// at least 1, far under float's resolution of the result, so outputs change only in bits a float
// cannot hold anyway. The previous mode is restored on exit, so the caller's threads keep theirs.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace inferd::cpu {

class FlushDenormalsScope {
 public:
#if defined(__x86_64__) || defined(__i386__)
  // FTZ (bit 15): denormal results become zero; DAZ (bit 6): denormal inputs read as zero.
  static constexpr unsigned kFtzDaz = 0x8040;
  FlushDenormalsScope() : saved_(_mm_getcsr()) {
    if ((saved_ & kFtzDaz) != kFtzDaz) _mm_setcsr(saved_ | kFtzDaz);
  }
  ~FlushDenormalsScope() {
    if ((saved_ & kFtzDaz) != kFtzDaz) _mm_setcsr(saved_);
  }
#else
  FlushDenormalsScope() = default;
#endif
  FlushDenormalsScope(const FlushDenormalsScope&) = delete;
  FlushDenormalsScope& operator=(const FlushDenormalsScope&) = delete;

 private:
#if defined(__x86_64__) || defined(__i386__)
  unsigned saved_;
#endif
};

}  // namespace inferd::cpu
