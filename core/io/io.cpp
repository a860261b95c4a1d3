// .npy reading/writing and the file helpers shared by all savers and loaders.
// Own parser rather than xtensor's xnpy, which asserts or reads out of bounds on bad input.
#include "core/io/io.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <system_error>

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

namespace xg {

namespace {

std::string errno_text(int err) { return std::generic_category().message(err); }

// ---- .npy header ------------------------------------------------------------------------------

constexpr char kNpyMagic[] = "\x93NUMPY";
constexpr std::size_t kNpyMagicSize = 6;
constexpr std::size_t kMaxDims = 64;  // NumPy 2's limit; anything larger is corrupt

enum class DType { f8, f4, i8, i4 };

struct NpyHeader {
    DType dtype = DType::f8;
    std::string descr;
    Shape shape;
    std::size_t count = 0;        // product of shape
    std::size_t data_offset = 0;  // where the raw elements start
};

std::size_t item_size(DType t) { return (t == DType::f8 || t == DType::i8) ? 8 : 4; }

// Recursive-descent parser for the header's Python dict literal, e.g.
// {'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }
// Only the literal forms NumPy writes are accepted; anything else is a malformed header.
class HeaderParser {
public:
    HeaderParser(const std::string& text, const std::string& op, const std::string& what)
        : text_(text), op_(op), what_(what) {}

    [[noreturn]] void malformed(const std::string& problem) const {
        fail(op_, fmt::format("{}: malformed .npy header ({} at character {} of \"{}\")", what_,
                              problem, pos_, printable(text_)));
    }
    static std::string printable(const std::string& s) {
        std::string out;
        for (char c : s.substr(0, 200)) out += (c >= 32 && c < 127) ? c : '?';
        return out;
    }

    void skip_space() {
        while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' ||
                                       text_[pos_] == '\r'))
            ++pos_;
    }
    bool consume(char c) {
        skip_space();
        if (pos_ < text_.size() && text_[pos_] == c) { ++pos_; return true; }
        return false;
    }
    void expect(char c) {
        if (!consume(c)) malformed(fmt::format("expected '{}'", c));
    }
    bool at_end() { skip_space(); return pos_ == text_.size(); }

    std::string parse_string() {
        skip_space();
        if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) malformed("expected a string");
        const char quote = text_[pos_++];
        const std::size_t end = text_.find(quote, pos_);
        if (end == std::string::npos) malformed("unterminated string");
        std::string s = text_.substr(pos_, end - pos_);
        if (s.find('\\') != std::string::npos) malformed("escape sequences are not supported");
        pos_ = end + 1;
        return s;
    }
    bool parse_bool() {
        skip_space();
        for (const auto& [word, value] : {std::pair<const char*, bool>{"True", true}, {"False", false}}) {
            const std::size_t n = std::strlen(word);
            if (text_.compare(pos_, n, word) == 0) { pos_ += n; return value; }
        }
        malformed("expected True or False");
    }
    std::size_t parse_dim() {
        skip_space();
        if (pos_ >= text_.size() || !std::isdigit(static_cast<unsigned char>(text_[pos_])))
            malformed("expected a non-negative integer");
        std::size_t v = 0;
        while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
            const std::size_t digit = static_cast<std::size_t>(text_[pos_++] - '0');
            if (v > (std::numeric_limits<std::size_t>::max() - digit) / 10) malformed("dimension too large");
            v = v * 10 + digit;
        }
        if (pos_ < text_.size() && text_[pos_] == 'L') ++pos_;  // Python 2 wrote longs as "3L"
        return v;
    }
    Shape parse_shape() {
        expect('(');
        Shape shape;
        if (consume(')')) return shape;
        while (true) {
            if (shape.size() == kMaxDims) malformed(fmt::format("more than {} dimensions", kMaxDims));
            shape.push_back(parse_dim());
            const bool comma = consume(',');
            if (consume(')')) {
                if (shape.size() == 1 && !comma) malformed("a 1-tuple needs a trailing comma");
                return shape;
            }
            if (!comma) malformed("expected ',' or ')'");
        }
    }

private:
    const std::string& text_;
    const std::string& op_;
    const std::string& what_;
    std::size_t pos_ = 0;
};

std::uint64_t read_le(const unsigned char* p, std::size_t n) {
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < n; ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
    return v;
}

DType parse_descr(const std::string& descr, const std::string& op, const std::string& what) {
    if (descr == "<f8") return DType::f8;
    if (descr == "<f4") return DType::f4;
    if (descr == "<i8") return DType::i8;
    if (descr == "<i4") return DType::i4;
    if (!descr.empty() && descr[0] == '>')
        fail(op, fmt::format("{}: big-endian dtype '{}' is not supported (save it little-endian)", what, descr));
    fail(op, fmt::format("{}: unsupported dtype '{}' (supported: '<f8', '<f4', '<i8', '<i4')", what,
                         HeaderParser::printable(descr)));
}

NpyHeader parse_header(const std::string& bytes, const std::string& op, const std::string& what) {
    if (bytes.size() < kNpyMagicSize + 2 || bytes.compare(0, kNpyMagicSize, kNpyMagic) != 0)
        fail(op, fmt::format("{}: not a .npy file (missing the \\x93NUMPY magic)", what));
    const auto* raw = reinterpret_cast<const unsigned char*>(bytes.data());
    const unsigned major = raw[6], minor = raw[7];
    if (major < 1 || major > 3 || minor != 0)
        fail(op, fmt::format("{}: unsupported .npy format version {}.{} (supported: 1.0, 2.0, 3.0)", what,
                             major, minor));
    const std::size_t len_size = major == 1 ? 2 : 4;
    const std::size_t text_start = kNpyMagicSize + 2 + len_size;
    if (bytes.size() < text_start) fail(op, fmt::format("{}: truncated .npy header", what));
    const std::size_t text_len = read_le(raw + kNpyMagicSize + 2, len_size);
    if (text_len > bytes.size() - text_start)
        fail(op, fmt::format("{}: truncated .npy header (declares {} header bytes, file has {})", what,
                             text_len, bytes.size() - text_start));

    const std::string text = bytes.substr(text_start, text_len);
    HeaderParser parser(text, op, what);
    NpyHeader header;
    bool seen_descr = false, seen_order = false, seen_shape = false, fortran_order = false;
    parser.expect('{');
    while (!parser.consume('}')) {
        const std::string key = parser.parse_string();
        parser.expect(':');
        bool* seen = nullptr;
        if (key == "descr") { seen = &seen_descr; header.descr = parser.parse_string(); }
        else if (key == "fortran_order") { seen = &seen_order; fortran_order = parser.parse_bool(); }
        else if (key == "shape") { seen = &seen_shape; header.shape = parser.parse_shape(); }
        else parser.malformed(fmt::format("unexpected key '{}'", HeaderParser::printable(key)));
        if (*seen) parser.malformed(fmt::format("duplicate key '{}'", key));
        *seen = true;
        if (!parser.consume(',')) { parser.expect('}'); break; }
    }
    if (!parser.at_end()) parser.malformed("unexpected text after the dict");
    if (!seen_descr || !seen_order || !seen_shape)
        parser.malformed("the dict needs the keys 'descr', 'fortran_order' and 'shape'");
    if (fortran_order)
        fail(op, fmt::format("{}: fortran_order True is not supported (save a C-ordered array)", what));
    header.dtype = parse_descr(header.descr, op, what);

    // Sizes of the non-zero axes must multiply without overflow even when another axis is 0,
    // because xtensor derives strides from them.
    const std::size_t limit = static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max()) / 8;
    std::size_t nonzero_product = 1;
    for (std::size_t d : header.shape) {
        if (d != 0 && nonzero_product > limit / d)
            fail(op, fmt::format("{}: absurd shape {} (element count overflows)", what, shape_str(header.shape)));
        if (d != 0) nonzero_product *= d;
    }
    const bool empty = std::find(header.shape.begin(), header.shape.end(), 0) != header.shape.end();
    header.count = empty ? 0 : nonzero_product;
    header.data_offset = text_start + text_len;
    const std::size_t need = header.count * item_size(header.dtype);
    const std::size_t have = bytes.size() - header.data_offset;
    if (have < need)
        fail(op, fmt::format("{}: truncated data: shape {} of '{}' needs {} bytes, found {}", what,
                             shape_str(header.shape), header.descr, need, have));
    if (have > need)
        fail(op, fmt::format("{}: {} unexpected bytes after the data of shape {} of '{}'", what, have - need,
                             shape_str(header.shape), header.descr));
    return header;
}

// Element i of the data block, widened: doubles for float dtypes, int64 for integer ones.
double float_at(const std::string& bytes, const NpyHeader& h, std::size_t i) {
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data()) + h.data_offset + i * item_size(h.dtype);
    if (h.dtype == DType::f8) {
        const std::uint64_t bits = read_le(p, 8);
        double v;
        std::memcpy(&v, &bits, 8);
        return v;
    }
    const auto bits = static_cast<std::uint32_t>(read_le(p, 4));
    float v;
    std::memcpy(&v, &bits, 4);
    return v;
}
std::int64_t int_at(const std::string& bytes, const NpyHeader& h, std::size_t i) {
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data()) + h.data_offset + i * item_size(h.dtype);
    if (h.dtype == DType::i8) return static_cast<std::int64_t>(read_le(p, 8));
    return static_cast<std::int32_t>(static_cast<std::uint32_t>(read_le(p, 4)));
}
bool is_float(DType t) { return t == DType::f8 || t == DType::f4; }

// The header, then `count` little-endian elements of `item` bytes each, element i's bits from `bits(i)`.
template <class Bits>
std::string encode_npy(const Shape& dims, const char* descr, std::size_t count, std::size_t item, Bits bits) {
    std::string shape = "(";
    for (std::size_t d : dims) shape += fmt::format("{}, ", d);
    if (dims.size() > 1) shape.resize(shape.size() - 2);  // (3,) keeps its comma, (2, 3) does not
    else if (dims.size() == 1) shape.pop_back();
    shape += ")";
    std::string text = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", descr, shape);
    // NumPy pads the header with spaces so the data starts 64-byte aligned, ending with '\n'.
    const bool v2 = text.size() + 1 + 64 > 65535;
    const std::size_t prefix = kNpyMagicSize + 2 + (v2 ? 4 : 2);
    text.append((64 - (prefix + text.size() + 1) % 64) % 64, ' ');
    text += '\n';

    std::string out(kNpyMagic, kNpyMagicSize);
    out += static_cast<char>(v2 ? 2 : 1);
    out += '\0';
    for (std::size_t i = 0; i < (v2 ? 4u : 2u); ++i) out += static_cast<char>((text.size() >> (8 * i)) & 0xff);
    out += text;
    const std::size_t data_start = out.size();
    out.resize(data_start + count * item);
    for (std::size_t i = 0; i < count; ++i) {
        const std::uint64_t b = bits(i);
        for (std::size_t k = 0; k < item; ++k) out[data_start + i * item + k] = static_cast<char>((b >> (8 * k)) & 0xff);
    }
    return out;
}

template <class T>
Shape dims_of(const xt::xarray<T>& a) { return Shape(a.shape().begin(), a.shape().end()); }

void write_bytes(const std::string& path, const std::string& bytes, const std::string& op) {
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
    if (!f) fail(op, fmt::format("cannot open '{}' for writing: {}", path, errno_text(errno)));
    if (std::fwrite(bytes.data(), 1, bytes.size(), f.get()) != bytes.size() || std::fflush(f.get()) != 0)
        fail(op, fmt::format("cannot write '{}': {}", path, errno_text(errno)));
    if (std::fclose(f.release()) != 0) fail(op, fmt::format("cannot write '{}': {}", path, errno_text(errno)));
}

void fsync_path(const std::string& path, int flags, const std::string& op) {
    const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
    if (fd < 0) fail(op, fmt::format("cannot open '{}' to sync it: {}", path, errno_text(errno)));
    // Some filesystems cannot sync directories (EINVAL); the rename is still done, so carry on.
    const int rc = ::fsync(fd);
    const int err = errno;
    ::close(fd);
    if (rc != 0 && err != EINVAL) fail(op, fmt::format("cannot sync '{}': {}", path, errno_text(err)));
}

}  // namespace

// ---- public .npy API --------------------------------------------------------------------------

std::string npy_bytes(const Array& a, Dtype dtype) {
    if (dtype == Dtype::Float32) {
        return encode_npy(dims_of(a), "<f4", a.size(), 4, [&](std::size_t i) {
            double rounded = a.data()[i];
            round_to_float32(&rounded, 1);  // as a float32 store (beyond float32's range: +-inf)
            const float v = static_cast<float>(rounded);  // exact now, never an out-of-range conversion
            std::uint32_t bits;
            std::memcpy(&bits, &v, 4);
            return std::uint64_t{bits};
        });
    }
    return encode_npy(dims_of(a), "<f8", a.size(), 8, [&](std::size_t i) {
        std::uint64_t bits;
        std::memcpy(&bits, a.data() + i, 8);
        return bits;
    });
}
std::string npy_bytes(const IndexArray& a) {
    return encode_npy(dims_of(a), "<i8", a.size(), 8, [&](std::size_t i) { return static_cast<std::uint64_t>(a.data()[i]); });
}

namespace {
Array parse_npy_values(const std::string& bytes, const NpyHeader& h, const std::string& what, const std::string& op) {
    Array out = Array::from_shape(h.shape);
    for (std::size_t i = 0; i < h.count; ++i) {
        if (is_float(h.dtype)) { out.data()[i] = float_at(bytes, h, i); continue; }
        const std::int64_t v = int_at(bytes, h, i);
        if (v > (std::int64_t{1} << 53) || v < -(std::int64_t{1} << 53))
            fail(op, fmt::format("{}: value {} at flat index {} of '{}' data cannot be held exactly by a double "
                                 "(use load_npy_int64)", what, v, i, h.descr));
        out.data()[i] = static_cast<double>(v);
    }
    return out;
}
}  // namespace

Array parse_npy(const std::string& bytes, const std::string& what, const std::string& op) {
    return parse_npy_values(bytes, parse_header(bytes, op, what), what, op);
}

Tensor parse_npy_tensor(const std::string& bytes, const std::string& what, const std::string& op) {
    const NpyHeader h = parse_header(bytes, op, what);
    // '<f4' values are float32 values already: the tensor holds them unchanged.
    const Dtype dtype = h.dtype == DType::f4 ? Dtype::Float32 : Dtype::Float64;
    return Tensor(parse_npy_values(bytes, h, what, op), dtype);
}

IndexArray parse_npy_int64(const std::string& bytes, const std::string& what) {
    const NpyHeader h = parse_header(bytes, "load_npy_int64", what);
    if (is_float(h.dtype))
        fail("load_npy_int64", fmt::format("{}: holds floating-point dtype '{}', expected an integer dtype "
                                           "('<i8' or '<i4')", what, h.descr));
    IndexArray out = IndexArray::from_shape(h.shape);
    for (std::size_t i = 0; i < h.count; ++i) out.data()[i] = int_at(bytes, h, i);
    return out;
}

void save_npy(const std::string& path, const Array& a, Dtype dtype) {
    write_file_bytes_atomic(path, npy_bytes(a, dtype), "save_npy");
}
void save_npy(const std::string& path, const IndexArray& a) {
    write_file_bytes_atomic(path, npy_bytes(a), "save_npy");
}
void save_npy(const std::string& path, const Tensor& t) {
    if (!t.defined()) fail("save_npy", fmt::format("cannot save an undefined tensor to '{}'", path));
    save_npy(path, t.value(), t.dtype());
}

Array load_npy(const std::string& path) { return parse_npy(read_file_bytes(path, "load_npy"), "'" + path + "'"); }
Tensor load_npy_tensor(const std::string& path) {
    return parse_npy_tensor(read_file_bytes(path, "load_npy"), "'" + path + "'");
}
IndexArray load_npy_int64(const std::string& path) {
    return parse_npy_int64(read_file_bytes(path, "load_npy_int64"), "'" + path + "'");
}

// ---- files ------------------------------------------------------------------------------------

std::string read_file_bytes(const std::string& path, const std::string& op) {
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
    if (!f) fail(op, fmt::format("cannot open '{}': {}", path, errno_text(errno)));
    std::string out;
    char buffer[1 << 16];
    std::size_t n;
    while ((n = std::fread(buffer, 1, sizeof buffer, f.get())) > 0) out.append(buffer, n);
    if (std::ferror(f.get())) fail(op, fmt::format("cannot read '{}': {}", path, errno_text(errno)));
    return out;
}

void write_file_bytes_atomic(const std::string& path, const std::string& bytes, const std::string& op) {
    write_file_atomic(path, [&](const std::string& tmp) { write_bytes(tmp, bytes, op); }, op);
}

void write_file_atomic(const std::string& path, const std::function<void(const std::string& tmp_path)>& writer,
                       const std::string& op) {
    namespace fs = std::filesystem;
    const fs::path target(path);
    const std::string name = target.filename().string();
    if (name.empty() || name == "." || name == "..") fail(op, fmt::format("'{}' does not name a file", path));
    const std::string dir = target.has_parent_path() ? target.parent_path().string() : ".";

    // O_EXCL makes the name ours alone; the counter keeps threads of one process apart.
    static std::atomic<unsigned> counter{0};
    std::string tmp;
    for (int attempt = 0;; ++attempt) {
        tmp = (fs::path(dir) / fmt::format(".{}.tmp.{}.{}", name, ::getpid(), counter++)).string();
        const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0) { ::close(fd); break; }
        if (errno != EEXIST || attempt == 100)
            fail(op, fmt::format("cannot create a temporary file next to '{}': {}", path, errno_text(errno)));
    }
    try {
        writer(tmp);
        fsync_path(tmp, O_RDONLY, op);
        if (std::rename(tmp.c_str(), path.c_str()) != 0)
            fail(op, fmt::format("cannot replace '{}': {}", path, errno_text(errno)));
    } catch (...) {
        std::remove(tmp.c_str());
        throw;
    }
    fsync_path(dir, O_RDONLY | O_DIRECTORY, op);  // makes the rename itself durable
}

}  // namespace xg
