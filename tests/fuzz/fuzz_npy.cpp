// libFuzzer target: .npy parsing must either succeed or throw xg::Error, and whatever it accepts
// must survive a write/parse round trip unchanged.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/io/io.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string bytes(reinterpret_cast<const char*>(data), size);
    try {
        const xg::Array a = xg::parse_npy(bytes, "fuzz input");
        const xg::Array again = xg::parse_npy(xg::npy_bytes(a), "round trip");
        // Compare bits, so NaN payloads count as equal to themselves (empty arrays may have no data
        // pointer at all, which memcmp must not see).
        if (again.shape() != a.shape() ||
            (a.size() != 0 && std::memcmp(again.data(), a.data(), a.size() * sizeof(double)) != 0))
            std::abort();
    } catch (const xg::Error&) {
    }
    try {
        const xg::IndexArray a = xg::parse_npy_int64(bytes, "fuzz input");
        if (xg::parse_npy_int64(xg::npy_bytes(a), "round trip").shape() != a.shape()) std::abort();
    } catch (const xg::Error&) {
    }
    return 0;
}
