// libFuzzer target: .npz parsing must either succeed or throw xg::Error, and whatever it accepts
// must survive a write/parse round trip with the same keys in the same order.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/io/io.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string bytes(reinterpret_cast<const char*>(data), size);
    try {
        const xg::NamedArrays arrays = xg::load_npz_bytes(bytes, "fuzz input");
        const xg::NamedArrays again = xg::load_npz_bytes(xg::npz_bytes(arrays), "round trip");
        if (again.size() != arrays.size()) std::abort();
        for (std::size_t i = 0; i < arrays.size(); ++i)
            if (again[i].first != arrays[i].first || again[i].second.shape() != arrays[i].second.shape()) std::abort();
    } catch (const xg::Error&) {
    }
    return 0;
}
