// IEEE half (Float16) and bfloat16 (BFloat16) storage types with float conversion.
// Arithmetic is done by converting to float; these types only define storage and rounding.
#pragma once

#include <cstdint>
#include <cstring>

namespace inferd {

inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float BitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

struct Float16 {
  uint16_t bits = 0;

  Float16() = default;
  explicit Float16(float f) : bits(FromFloat(f)) {}
  static Float16 FromBits(uint16_t b) {
    Float16 h;
    h.bits = b;
    return h;
  }
  operator float() const { return ToFloat(bits); }  // NOLINT: implicit widening is lossless

  // Round-to-nearest-even conversion, handling subnormals, infinities and NaN.
  static uint16_t FromFloat(float f) {
    uint32_t x = FloatBits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t abs = x & 0x7fffffffu;
    if (abs >= 0x7f800000u) {  // Inf or NaN
      return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
    }
    if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow → inf
    if (abs < 0x38800000u) {  // subnormal or zero in half
      // Use float arithmetic: adding 0.5 (as magic) performs the rounding.
      float v = BitsToFloat(abs) + 0.5f;
      return static_cast<uint16_t>(sign | (FloatBits(v) - 0x3f000000u));
    }
    uint32_t mant_odd = (abs >> 13) & 1u;
    abs += 0xc8000fffu + mant_odd;  // rebias exponent (-112 << 23) and round
    return static_cast<uint16_t>(sign | (abs >> 13));
  }
  static float ToFloat(uint16_t h) {
    uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0) {
      if (mant == 0) return BitsToFloat(sign);
      float v = static_cast<float>(mant) * (1.0f / 16777216.0f);  // mant * 2^-24
      return sign ? -v : v;
    }
    if (exp == 31) return BitsToFloat(sign | 0x7f800000u | (mant << 13));
    return BitsToFloat(sign | ((exp + 112u) << 23) | (mant << 13));
  }
};

struct BFloat16 {
  uint16_t bits = 0;

  BFloat16() = default;
  explicit BFloat16(float f) : bits(FromFloat(f)) {}
  static BFloat16 FromBits(uint16_t b) {
    BFloat16 h;
    h.bits = b;
    return h;
  }
  operator float() const { return BitsToFloat(static_cast<uint32_t>(bits) << 16); }  // NOLINT

  static uint16_t FromFloat(float f) {
    uint32_t x = FloatBits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN
    uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);  // round to nearest even
    return static_cast<uint16_t>((x + rounding) >> 16);
  }
};

}  // namespace inferd
