// libFuzzer target: IDX parsing must either succeed or throw xg::Error, and an accepted file's
// bytes must match its shape.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/io/io.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string bytes(reinterpret_cast<const char*>(data), size);
    try {
        const xg::IdxData idx = xg::parse_idx(bytes, "fuzz input");
        std::size_t count = 1;
        for (std::size_t extent : idx.shape) count *= extent;
        if (idx.shape.empty() || count != idx.bytes.size()) std::abort();
    } catch (const xg::Error&) {
    }
    return 0;
}
