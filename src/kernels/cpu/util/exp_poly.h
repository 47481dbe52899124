// The constants of the attention kernels' vector e^x (Cephes' expf: round-to-nearest range
// reduction by ln 2 in two parts, then a degree-5 polynomial), in one place for the three
// implementations that must agree: flash_attention.cc's ExpV8 (portable vector extension) and
// dense_attention.cc's Exp8 (AVX2) and Exp16 (AVX-512), whose results are compared bit for bit.
#pragma once

namespace inferd::cpu::exp_poly {

inline constexpr float kMinArg = -87.3f;  // arguments below read as this: e^-87.3, not 0
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kLn2Hi = 0.693359375f;    // ln 2 = kLn2Hi - kLn2Lo, the high part exact
inline constexpr float kLn2Lo = 2.12194440e-4f;
// p(r) = ((((kP[0]·r + kP[1])·r + kP[2])·r + kP[3])·r + kP[4])·r + kP[5]; e^r ≈ p·r² + r + 1.
inline constexpr float kP[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};

}  // namespace inferd::cpu::exp_poly
