// IDX files (the MNIST / Fashion-MNIST format): a 4-byte magic 00 00 <type> <ndim>, ndim big-endian
// uint32 sizes, then the elements in row-major order. Only unsigned bytes (type 0x08) are read.
#include "core/io/io.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <limits>
#include <memory>
#include <system_error>

#include <fmt/format.h>
#include <zlib.h>

namespace xg {

namespace {

constexpr std::size_t kMagicSize = 4;

struct IdxLayout {
    std::vector<std::size_t> shape;
    std::size_t header_size = 0;  // magic plus sizes
    std::size_t data_size = 0;    // bytes of elements promised by the shape
};

const char* type_name(unsigned code) {
    switch (code) {
        case 0x09: return "signed byte";
        case 0x0B: return "int16";
        case 0x0C: return "int32";
        case 0x0D: return "float32";
        case 0x0E: return "float64";
        default: return "unknown";
    }
}

std::uint32_t read_be32(const std::string& bytes, std::size_t offset) {
    std::uint32_t v = 0;
    for (std::size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(bytes[offset + i]);
    return v;
}

// The header needs the first kMagicSize bytes to know its own length (header_size_for), then all
// of it; `header` may hold more than the header.
std::size_t header_size_for(const std::string& header, const std::string& op, const std::string& what) {
    if (header.size() < kMagicSize)
        fail(op, fmt::format("{}: truncated IDX header: {} of the 4 magic bytes present", what, header.size()));
    return kMagicSize + 4 * static_cast<unsigned char>(header[3]);
}

IdxLayout decode_header(const std::string& header, const std::string& op, const std::string& what) {
    const std::size_t header_size = header_size_for(header, op, what);
    const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(header[i]); };
    if (byte(0) != 0 || byte(1) != 0)
        fail(op, fmt::format("{}: not an IDX file (magic starts {:02x} {:02x}, expected 00 00)", what, byte(0),
                             byte(1)));
    if (byte(2) != 0x08)
        fail(op, fmt::format("{}: unsupported IDX type 0x{:02x} ({}); only unsigned byte (0x08) is supported",
                             what, byte(2), type_name(byte(2))));
    const std::size_t ndim = byte(3);
    if (ndim == 0) fail(op, fmt::format("{}: IDX header declares 0 dimensions", what));
    if (header.size() < header_size)
        fail(op, fmt::format("{}: truncated IDX header: {} dimensions need {} bytes, found {}", what, ndim,
                             header_size, header.size()));

    IdxLayout layout;
    layout.header_size = header_size;
    layout.data_size = 1;
    for (std::size_t d = 0; d < ndim; ++d) {
        const std::size_t extent = read_be32(header, kMagicSize + 4 * d);
        layout.shape.push_back(extent);
        // Non-zero extents must multiply without overflow even when another one is 0.
        if (extent != 0 && layout.data_size > static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max()) / extent)
            fail(op, fmt::format("{}: absurd IDX shape (byte count overflows) at dimension {}", what, d));
        if (extent != 0) layout.data_size *= extent;
    }
    if (std::find(layout.shape.begin(), layout.shape.end(), 0) != layout.shape.end()) layout.data_size = 0;
    return layout;
}

[[noreturn]] void fail_data_size(const std::string& op, const std::string& what, const IdxLayout& layout,
                                 std::size_t found) {
    if (found < layout.data_size)
        fail(op, fmt::format("{}: truncated IDX data: shape {} needs {} bytes, found {}", what,
                             shape_str(layout.shape), layout.data_size, found));
    fail(op, fmt::format("{}: {} unexpected bytes after the IDX data of shape {}", what, found - layout.data_size,
                         shape_str(layout.shape)));
}

struct GzCloser {
    void operator()(gzFile_s* file) const { gzclose(file); }
};

// Reads up to `n` decompressed bytes (fewer only at end of file); corrupt data throws.
std::size_t gz_read(gzFile file, unsigned char* dst, std::size_t n, const std::string& what) {
    std::size_t total = 0;
    while (total < n) {
        const auto chunk = static_cast<unsigned>(std::min<std::size_t>(n - total, 1u << 30));
        const int got = gzread(file, dst + total, chunk);
        int code = Z_OK;
        const char* message = gzerror(file, &code);
        if (got < 0 || (code != Z_OK && code != Z_STREAM_END))
            fail("read_idx", fmt::format("{}: corrupt or truncated gzip stream ({})", what, message));
        if (got == 0) break;
        total += static_cast<std::size_t>(got);
    }
    return total;
}

}  // namespace

IdxData parse_idx(const std::string& bytes, const std::string& what) {
    const IdxLayout layout = decode_header(bytes, "parse_idx", what);
    const std::size_t found = bytes.size() - layout.header_size;
    if (found != layout.data_size) fail_data_size("parse_idx", what, layout, found);
    IdxData out;
    out.shape = layout.shape;
    out.bytes.assign(bytes.begin() + static_cast<std::ptrdiff_t>(layout.header_size), bytes.end());
    return out;
}

IdxData read_idx(const std::string& path) {
    const std::string what = "'" + path + "'";
    errno = 0;
    // gzread passes plain (uncompressed) files through unchanged, so one path reads both.
    std::unique_ptr<gzFile_s, GzCloser> file(gzopen(path.c_str(), "rb"));
    if (!file)
        fail("read_idx", fmt::format("cannot open {}: {}", what, errno ? std::generic_category().message(errno)
                                                                       : std::string("out of memory")));

    std::string header(kMagicSize, '\0');
    auto* header_bytes = reinterpret_cast<unsigned char*>(header.data());
    header.resize(gz_read(file.get(), header_bytes, kMagicSize, what));
    const std::size_t header_size = header_size_for(header, "read_idx", what);
    header.resize(header_size);
    header_bytes = reinterpret_cast<unsigned char*>(header.data());
    header.resize(kMagicSize + gz_read(file.get(), header_bytes + kMagicSize, header_size - kMagicSize, what));
    const IdxLayout layout = decode_header(header, "read_idx", what);

    // Grow in chunks instead of trusting the header's size up front: a lying header then fails
    // as truncated instead of allocating gigabytes.
    IdxData out;
    out.shape = layout.shape;
    constexpr std::size_t kChunk = std::size_t{1} << 24;
    while (out.bytes.size() < layout.data_size) {
        const std::size_t before = out.bytes.size();
        const std::size_t want = std::min(kChunk, layout.data_size - before);
        out.bytes.resize(before + want);
        const std::size_t got = gz_read(file.get(), out.bytes.data() + before, want, what);
        out.bytes.resize(before + got);
        if (got < want) fail_data_size("read_idx", what, layout, out.bytes.size());
    }
    std::size_t trailing = 0;
    unsigned char scratch[1 << 16];
    for (std::size_t got; (got = gz_read(file.get(), scratch, sizeof scratch, what)) > 0;) trailing += got;
    if (trailing > 0) fail_data_size("read_idx", what, layout, layout.data_size + trailing);
    return out;
}

}  // namespace xg
