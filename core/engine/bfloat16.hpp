// xg::bfloat16: the storage type of a bfloat16 tensor (docs/precision.md). It only stores: a value
// is float32's upper 16 bits (sign, float32's 8-bit exponent, 7 fraction bits), so it widens to
// float exactly and every arithmetic operation on it happens in float or double after that
// widening (the "float accumulation" of mixed-precision training). Storing rounds once to nearest,
// ties to even, from float or straight from double.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

namespace xg {

struct bfloat16 {
    std::uint16_t bits = 0;

    bfloat16() = default;
    /// Any number, rounded once to the nearest bfloat16 (ties to even; beyond range +-inf).
    template <class U, std::enable_if_t<std::is_arithmetic_v<U>, int> = 0>
    bfloat16(U v) : bits(round_bits(v)) {}
    /// The exact value, as float (and from there double).
    operator float() const {
        const std::uint32_t wide = std::uint32_t(bits) << 16;
        float f;
        std::memcpy(&f, &wide, sizeof f);
        return f;
    }
    /// The bfloat16 holding `b` as its bit pattern.
    static bfloat16 from_bits(std::uint16_t b) {
        bfloat16 h;
        h.bits = b;
        return h;
    }

private:
    // Float to bfloat16, to nearest even: add half an ulp of the result (minus one when the kept
    // last bit is 0) and drop the low 16 bits; the carry walks into the exponent (up to inf) as it
    // should. A NaN stays a (quiet) NaN.
    static std::uint16_t round_float(float f) {
        std::uint32_t u;
        std::memcpy(&u, &f, sizeof u);
        if (std::isnan(f)) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
        u += 0x7FFFu + ((u >> 16) & 1u);
        return static_cast<std::uint16_t>(u >> 16);
    }
    // Double to bfloat16 in one rounding: to float by round-to-odd first (float keeps 16 more
    // fraction bits than bfloat16, so rounding that to nearest even is then exact), as a plain
    // double->float->bfloat16 cast would round twice.
    static std::uint16_t round_double(double d) {
        float f = static_cast<float>(d);
        if (static_cast<double>(f) != d && !std::isnan(d)) {
            if (std::fabs(static_cast<double>(f)) > std::fabs(d)) f = std::nextafter(f, 0.0f);  // truncated
            std::uint32_t u;
            std::memcpy(&u, &f, sizeof u);
            u |= 1u;  // sticky: inexact
            std::memcpy(&f, &u, sizeof f);
        }
        return round_float(f);
    }
    template <class U>
    static std::uint16_t round_bits(U v) {
        if constexpr (std::is_same_v<U, float>) {
            return round_float(v);
        } else {
            return round_double(static_cast<double>(v));
        }
    }
};

}  // namespace xg

/// What kernels templated on T ask of their storage type (a running maximum starts at -infinity).
template <>
class std::numeric_limits<xg::bfloat16> {
public:
    static constexpr bool is_specialized = true;
    static constexpr bool has_infinity = true;
    static constexpr bool has_quiet_NaN = true;
    static constexpr int digits = 8;  // with the implicit bit
    static xg::bfloat16 infinity() { return xg::bfloat16::from_bits(0x7F80); }
    static xg::bfloat16 quiet_NaN() { return xg::bfloat16::from_bits(0x7FC0); }
    static xg::bfloat16 max() { return xg::bfloat16::from_bits(0x7F7F); }
    static xg::bfloat16 lowest() { return xg::bfloat16::from_bits(0xFF7F); }
    static xg::bfloat16 min() { return xg::bfloat16::from_bits(0x0080); }
    static xg::bfloat16 epsilon() { return xg::bfloat16::from_bits(0x3C00); }  // 2^-7
};
