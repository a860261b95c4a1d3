// The number formats of tutorial 19 (the precision lab): float16 and bfloat16 emulated in software,
// next to the hardware's float and double. An emulated number keeps its value in a float that is
// always representable in its format, and rounds to the nearest representable value, ties to even,
// on every store: each operation is done in float and its result rounded to the format. That double
// rounding (to float, then to the format) gives the correctly rounded result for + - * / and sqrt,
// because float carries at least 2p + 2 bits for a format of p bits (24 >= 2 * 11 + 2), so the lab's
// float16 and bfloat16 round exactly as hardware with those formats would (no fused multiply-add).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

namespace tutorial_values::precision_lab {

/// x rounded to the nearest number with `digits` significant bits (the leading one included) and
/// exponents emin..emax, ties to even: below 2^emin the spacing stays 2^(emin - digits + 1) (the
/// subnormals, down to 0), and beyond the largest finite number the result is +-infinity. NaN and
/// infinities pass through. One rounding from any double: the lab's conversions of its float64 data.
inline double round_to_format(double x, int digits, int emin, int emax) {
    if (!std::isfinite(x) || x == 0) return x;
    int e = 0;
    std::frexp(x, &e);  // |x| = m 2^e with m in [0.5, 1): the leading bit is worth 2^(e - 1)
    const int quantum = (e - 1 > emin ? e - 1 : emin) - (digits - 1);  // the spacing at x is 2^quantum
    const double r = std::ldexp(std::nearbyint(std::ldexp(x, -quantum)), quantum);  // nearbyint: ties to even
    const double largest = std::ldexp(2.0 - std::ldexp(1.0, 1 - digits), emax);
    return std::fabs(r) > largest ? std::copysign(std::numeric_limits<double>::infinity(), x) : r;
}

/// bfloat16 (8 significant bits, float's exponent range) from a float, on its bit pattern: add just
/// under half of the 16 dropped bits, plus one when the kept part is odd (ties to even), and drop
/// them. A carry out of the significand moves the exponent up, so the largest floats round to
/// infinity by themselves; a NaN is kept a (quiet) NaN, which the addition could turn into infinity.
inline float round_to_bfloat16(float f) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &f, sizeof bits);
    if ((bits & 0x7fffffffu) > 0x7f800000u) {
        bits = (bits | 0x00400000u) & 0xffff0000u;  // NaN: set the quiet bit so truncation keeps it NaN
    } else {
        bits += 0x7fffu + ((bits >> 16) & 1u);
        bits &= 0xffff0000u;
    }
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

/// float16 (11 significant bits, exponents -14..15, largest 65504, subnormals down to 2^-24) from a
/// float: GCC's _Float16 conversion where the compiler has it (GCC 12 on x86-64), else round_to_format.
inline float round_to_float16(float f) {
#if defined(__FLT16_MANT_DIG__)
    return static_cast<float>(static_cast<_Float16>(f));
#else
    return static_cast<float>(round_to_format(f, 11, -14, 15));
#endif
}

struct Float16Rounding {
    static constexpr int digits = 11, emin = -14, emax = 15;
    static float round(float f) { return round_to_float16(f); }
};
struct BFloat16Rounding {
    static constexpr int digits = 8, emin = -126, emax = 127;
    static float round(float f) { return round_to_bfloat16(f); }
};

/// A number of a narrow format: its value is a float the format can hold; every result is rounded.
template <class Rounding>
struct Narrow {
    float v = 0;
    Narrow() = default;
    /// The nearest value of the format to x (one rounding, from double).
    static Narrow from(double x) {
        Narrow n;
        n.v = static_cast<float>(round_to_format(x, Rounding::digits, Rounding::emin, Rounding::emax));
        return n;
    }
    /// A float result rounded to the format (exact for results of one float operation on narrow values).
    static Narrow rounded(float f) {
        Narrow n;
        n.v = Rounding::round(f);
        return n;
    }
    friend Narrow operator+(Narrow a, Narrow b) { return rounded(a.v + b.v); }
    friend Narrow operator-(Narrow a, Narrow b) { return rounded(a.v - b.v); }
    friend Narrow operator*(Narrow a, Narrow b) { return rounded(a.v * b.v); }
    friend Narrow operator/(Narrow a, Narrow b) { return rounded(a.v / b.v); }
    Narrow& operator+=(Narrow b) { return *this = *this + b; }
    Narrow& operator-=(Narrow b) { return *this = *this - b; }
    friend Narrow sqrt(Narrow a) { return rounded(std::sqrt(a.v)); }
};

using Float16 = Narrow<Float16Rounding>;
using BFloat16 = Narrow<BFloat16Rounding>;

/// What the lab needs to know of each of its four formats.
template <class T>
struct Format;
template <>
struct Format<double> {
    static constexpr const char* name = "float64";
    static constexpr double unit_roundoff = 0x1p-53;
};
template <>
struct Format<float> {
    static constexpr const char* name = "float32";
    static constexpr double unit_roundoff = 0x1p-24;
};
template <>
struct Format<Float16> {
    static constexpr const char* name = "float16";
    static constexpr double unit_roundoff = 0x1p-11;
};
template <>
struct Format<BFloat16> {
    static constexpr const char* name = "bfloat16";
    static constexpr double unit_roundoff = 0x1p-8;
};

/// The value of any of the formats as a double (exact).
inline double as_double(double x) { return x; }
inline double as_double(float x) { return x; }
template <class R>
double as_double(Narrow<R> x) {
    return x.v;
}

/// x stored in format T: rounded to the nearest value of T (exact when T holds x).
template <class T>
T store(double x) {
    if constexpr (std::is_same_v<T, double>) {
        return x;
    } else if constexpr (std::is_same_v<T, float>) {
        return static_cast<float>(x);
    } else {
        return T::from(x);
    }
}

/// A value of one format converted to another (what a kernel does reading storage into its accumulator).
template <class To, class From>
To convert(From x) {
    return store<To>(as_double(x));
}

}  // namespace tutorial_values::precision_lab
