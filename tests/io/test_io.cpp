// File I/O: .npy/.npz round trips and NumPy compatibility, IDX datasets, atomic saves, and a clear
// xg::Error (naming the file and the problem) for every kind of bad file.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <type_traits>

#include <unistd.h>
#include <zlib.h>

#include "core/io/io.hpp"
#include "tests/support/temp_dir.hpp"

namespace xg_test_io {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace fs = std::filesystem;
using Catch::Contains;

namespace {

const std::string kFixtures = XGRAD_FIXTURES_DIR;

// A fresh directory per test case, removed afterwards.
using xg::test::TempDir;

// A .npy file with the given header dict and raw data, as NumPy would frame it.
std::string make_npy(const std::string& dict, const std::string& data, char major = 1) {
    std::string header = dict + "\n";
    std::string out = std::string("\x93NUMPY", 6) + major + '\0';
    out += static_cast<char>(header.size() & 0xff);
    out += static_cast<char>(header.size() >> 8);
    if (major != 1) out += std::string(2, '\0');
    return out + header + data;
}
std::string f8_dict(const std::string& shape) {
    return "{'descr': '<f8', 'fortran_order': False, 'shape': " + shape + ", }";
}
std::string le_bytes(std::uint64_t v, std::size_t n) {
    std::string s;
    for (std::size_t i = 0; i < n; ++i) s += static_cast<char>((v >> (8 * i)) & 0xff);
    return s;
}
std::string be32(std::uint32_t v) {
    return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
}
std::string idx_bytes(char type, const std::vector<std::uint32_t>& shape, const std::string& data) {
    std::string out{'\0', '\0', type, static_cast<char>(shape.size())};
    for (auto d : shape) out += be32(d);
    return out + data;
}
void replace_all(std::string& s, const std::string& from, const std::string& to) {
    for (auto pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size()))
        s.replace(pos, from.size(), to);
}

// Bitwise-style equality (NaN equals NaN, -0 differs from 0); also keeps xtensor's == out of
// Catch's expression templates, which do not mix.
template <class T>
bool same_values(const xt::xarray<T>& a, const xt::xarray<T>& b) {
    if (a.shape() != b.shape()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        if constexpr (std::is_integral_v<T>) {
            if (a.data()[i] != b.data()[i]) return false;
            continue;
        }
        const double x = static_cast<double>(a.data()[i]), y = static_cast<double>(b.data()[i]);
        if (!(x == y || (std::isnan(x) && std::isnan(y))) || std::signbit(x) != std::signbit(y)) return false;
    }
    return true;
}

}  // namespace

TEST_CASE("npy round trip keeps shape and every bit of the values", "[io]") {
    TempDir dir;
    const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
    const std::vector<xg::Array> arrays = {
        xg::Array(3.5),                                  // 0-D
        xg::Array::from_shape({0}),                      // empty
        xg::Array::from_shape({2, 0, 3}),                // empty with other axes
        xg::Array{1.0, -0.0, nan, inf, -inf, 1e-310},    // specials and a denormal
        xt::reshape_view(xt::arange<double>(24.0) / 7.0, {2, 3, 4}),
    };
    for (const auto& a : arrays) {
        CAPTURE(xg::shape_str(xg::Shape(a.shape().begin(), a.shape().end())));
        const std::string path = dir.file("a.npy");
        xg::save_npy(path, a);
        CHECK(same_values(xg::load_npy(path), a));
        CHECK(same_values(xg::parse_npy(xg::npy_bytes(a), "memory"), a));
    }
    xg::save_npy(dir.file("t.npy"), xg::Tensor({{1.0, 2.0}, {3.0, 4.0}}));
    CHECK(same_values(xg::load_npy(dir.file("t.npy")), xg::Array{{1.0, 2.0}, {3.0, 4.0}}));
    const xg::IndexArray big{{-(std::int64_t{1} << 62), 7}, {0, std::numeric_limits<std::int64_t>::max()}};
    xg::save_npy(dir.file("i.npy"), big);
    CHECK(same_values(xg::load_npy_int64(dir.file("i.npy")), big));
}

TEST_CASE("npy fixtures written by NumPy load, and re-saving them reproduces NumPy's bytes", "[io]") {
    const std::string index_path = kFixtures + "/op_gather/index.npy";
    const xg::IndexArray index = xg::load_npy_int64(index_path);
    REQUIRE(index.shape() == std::vector<std::size_t>{3, 4});
    CHECK(index(0, 0) == 0);
    CHECK(index(0, 1) == 2);
    CHECK(index(2, 1) == 0);
    CHECK(xg::load_npy(index_path)(0, 3) == 4.0);  // integers load exactly as doubles too
    CHECK(xg::npy_bytes(index) == xg::read_file_bytes(index_path, "test"));

    const std::string x_path = kFixtures + "/op_gather/x.npy";
    const xg::Array x = xg::load_npy(x_path);
    REQUIRE(x.shape() == std::vector<std::size_t>{3, 5});
    CHECK(x(0, 0) == -1.0099225905221136);
    CHECK(x(0, 2) == -0.4092048829936345);
    CHECK(xg::npy_bytes(x) == xg::read_file_bytes(x_path, "test"));
}

TEST_CASE("npy accepts <f4 and <i4, format 2.0 and Python 2 long dims", "[io]") {
    const float f = 0.25f;
    std::uint32_t fbits;
    std::memcpy(&fbits, &f, 4);
    const auto a = xg::parse_npy(
        make_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", le_bytes(fbits, 4) + le_bytes(fbits, 4)),
        "f4");
    CHECK(a == xg::Array{0.25, 0.25});
    const std::string i4 = make_npy("{'descr': '<i4', 'fortran_order': False, 'shape': (2L,)}",
                                    le_bytes(0xFFFFFFFFu, 4) + le_bytes(5, 4));
    CHECK(same_values(xg::parse_npy_int64(i4, "i4"), xg::IndexArray{-1, 5}));
    CHECK(same_values(xg::parse_npy(i4, "i4"), xg::Array{-1.0, 5.0}));
    CHECK(same_values(xg::parse_npy(make_npy(f8_dict("()"), le_bytes(0, 8), 2), "v2"), xg::Array(0.0)));
}

TEST_CASE("bad npy files raise xg::Error naming the file and the problem", "[io]") {
    TempDir dir;
    const std::string good = xg::npy_bytes(xg::Array{{1.0, 2.0}, {3.0, 4.0}});
    const auto load = [&](const std::string& name, const std::string& bytes) { xg::load_npy(dir.write(name, bytes)); };
    const std::string data16 = std::string(16, '\0');

    REQUIRE_THROWS_AS(xg::load_npy(dir.file("missing.npy")), xg::Error);
    REQUIRE_THROWS_WITH(xg::load_npy(dir.file("missing.npy")),
                        Contains("load_npy") && Contains("missing.npy") && Contains("No such file"));
    REQUIRE_THROWS_WITH(load("garbage.npy", "hello world"), Contains("garbage.npy") && Contains("not a .npy file"));
    REQUIRE_THROWS_WITH(load("cut.npy", good.substr(0, good.size() - 3)),
                        Contains("cut.npy") && Contains("truncated data") && Contains("(2, 2)") &&
                            Contains("needs 32 bytes, found 29"));
    REQUIRE_THROWS_WITH(load("long.npy", good + "xx"), Contains("long.npy") && Contains("2 unexpected bytes"));
    REQUIRE_THROWS_WITH(load("head.npy", good.substr(0, 20)), Contains("head.npy") && Contains("truncated .npy header"));
    REQUIRE_THROWS_WITH(load("fortran.npy", make_npy("{'descr': '<f8', 'fortran_order': True, 'shape': (2,)}", data16)),
                        Contains("fortran.npy") && Contains("fortran_order True"));
    REQUIRE_THROWS_WITH(load("big.npy", make_npy("{'descr': '>f8', 'fortran_order': False, 'shape': (2,)}", data16)),
                        Contains("big.npy") && Contains("big-endian dtype '>f8'"));
    REQUIRE_THROWS_WITH(load("obj.npy", make_npy("{'descr': '|O', 'fortran_order': False, 'shape': (2,)}", data16)),
                        Contains("obj.npy") && Contains("unsupported dtype '|O'"));
    REQUIRE_THROWS_WITH(load("rec.npy", make_npy("{'descr': [('a', '<f8')], 'fortran_order': False, 'shape': (2,)}",
                                                 data16)),
                        Contains("rec.npy") && Contains("malformed .npy header"));
    REQUIRE_THROWS_WITH(load("nokey.npy", make_npy("{'descr': '<f8', 'shape': (2,)}", data16)),
                        Contains("nokey.npy") && Contains("needs the keys"));
    REQUIRE_THROWS_WITH(load("tuple.npy", make_npy(f8_dict("(2)"), data16)),
                        Contains("tuple.npy") && Contains("trailing comma"));
    REQUIRE_THROWS_WITH(load("neg.npy", make_npy(f8_dict("(-2,)"), data16)), Contains("non-negative integer"));
    REQUIRE_THROWS_WITH(load("huge.npy", make_npy(f8_dict("(4294967296, 4294967296, 0)"), "")),
                        Contains("huge.npy") && Contains("absurd shape"));
    REQUIRE_THROWS_WITH(load("overflow.npy", make_npy(f8_dict("(99999999999999999999999,)"), "")),
                        Contains("dimension too large"));
    std::string future = good;
    future[6] = 9;
    REQUIRE_THROWS_WITH(load("v9.npy", future), Contains("v9.npy") && Contains("version 9.0"));

    const std::string huge_int = make_npy("{'descr': '<i8', 'fortran_order': False, 'shape': (1,)}",
                                          le_bytes((std::uint64_t{1} << 53) + 1, 8));
    REQUIRE_THROWS_WITH(load("int.npy", huge_int), Contains("int.npy") && Contains("cannot be held exactly"));
    REQUIRE_THROWS_WITH(xg::load_npy_int64(dir.write("float.npy", good)),
                        Contains("load_npy_int64") && Contains("float.npy") && Contains("floating-point dtype '<f8'"));
}

TEST_CASE("npz round trip keeps keys with dots, order and values", "[io]") {
    TempDir dir;
    const xg::NamedArrays arrays = {
        {"zeta", xg::Array{{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}}},
        {"blocks.0.ln.weight", xg::Array{0.5, -0.25}},
        {"alpha", xg::Array(42.0)},
        {"empty", xg::Array::from_shape({0, 4})},
    };
    for (const bool compress : {false, true}) {
        const std::string path = dir.file(compress ? "c.npz" : "s.npz");
        xg::save_npz(path, arrays, compress);
        const xg::NamedArrays loaded = xg::load_npz(path);
        REQUIRE(loaded.size() == arrays.size());
        for (std::size_t i = 0; i < arrays.size(); ++i) {
            CHECK(loaded[i].first == arrays[i].first);
            CHECK(same_values(loaded[i].second, arrays[i].second));
        }
    }
    CHECK(xg::npz_bytes(arrays) == xg::npz_bytes(arrays));  // reproducible bytes
    CHECK(xg::load_npz_bytes(xg::npz_bytes({}), "empty").empty());
    REQUIRE_THROWS_WITH(xg::npz_bytes({{"a", xg::Array(1.0)}, {"a", xg::Array(2.0)}}),
                        Contains("save_npz") && Contains("duplicate array key 'a'"));
    REQUIRE_THROWS_WITH(xg::npz_bytes({{"", xg::Array(1.0)}}), Contains("must not be empty"));
}

TEST_CASE("bad npz files raise xg::Error naming the file, the entry and the problem", "[io]") {
    TempDir dir;
    const std::string good = xg::npz_bytes({{"w", xg::Array{1.0, 2.0, 3.0}}, {"b", xg::Array{4.0}}});
    const auto load = [&](const std::string& name, const std::string& bytes) { xg::load_npz(dir.write(name, bytes)); };

    REQUIRE_THROWS_WITH(xg::load_npz(dir.file("missing.npz")), Contains("load_npz") && Contains("missing.npz"));
    REQUIRE_THROWS_WITH(load("empty.npz", ""), Contains("empty.npz") && Contains("empty file"));
    REQUIRE_THROWS_WITH(load("garbage.npz", std::string(100, 'x')),
                        Contains("garbage.npz") && Contains("not a valid zip archive"));
    REQUIRE_THROWS_WITH(load("cut.npz", good.substr(0, good.size() / 2)),
                        Contains("cut.npz") && Contains("not a valid zip archive"));

    std::string renamed = good;
    replace_all(renamed, "w.npy", "w.txt");
    REQUIRE_THROWS_WITH(load("renamed.npz", renamed), Contains("renamed.npz") && Contains("entry 'w.txt' is not"));
    std::string twice = good;
    replace_all(twice, "b.npy", "w.npy");
    REQUIRE_THROWS_WITH(load("twice.npz", twice), Contains("twice.npz") && Contains("duplicate entry"));

    // Flip one data byte of entry w: the CRC no longer matches.
    std::string flipped = good;
    const auto w_data = flipped.find("\x93NUMPY") + 128;
    flipped[w_data] = static_cast<char>(flipped[w_data] ^ 1);
    REQUIRE_THROWS_WITH(load("crc.npz", flipped), Contains("crc.npz") && Contains("entry 'w.npy'") && Contains("CRC"));

    // A well-formed zip whose entry is a bad .npy (big-endian): patch the data and its CRC.
    std::string bad_npy = good;
    const auto npy_start = bad_npy.find("\x93NUMPY");
    const std::string npy = xg::npy_bytes(xg::Array{1.0, 2.0, 3.0});
    const auto crc_of = [](const std::string& s) {
        return le_bytes(crc32(0, reinterpret_cast<const Bytef*>(s.data()), static_cast<uInt>(s.size())), 4);
    };
    std::string patched = npy;
    replace_all(patched, "<f8", ">f8");
    bad_npy.replace(npy_start, npy.size(), patched);
    replace_all(bad_npy, crc_of(npy), crc_of(patched));
    REQUIRE_THROWS_WITH(load("endian.npz", bad_npy), Contains("load_npz") && Contains("endian.npz") &&
                                                          Contains("entry 'w.npy'") && Contains("big-endian"));
}

TEST_CASE("IDX sample of Fashion-MNIST reads from gzip and plain files", "[io]") {
    const xg::IdxData images = xg::read_idx(kFixtures + "/idx/t10k-first5-images-idx3-ubyte.gz");
    REQUIRE(images.shape == std::vector<std::size_t>{5, 28, 28});
    REQUIRE(images.bytes.size() == 5 * 28 * 28);
    std::size_t sum = 0;
    for (auto b : images.bytes) sum += b;
    CHECK(sum == 284002);                      // values from scripts/make_idx_sample.py's source
    CHECK(images.bytes[14 * 28 + 14] == 110);  // image 0, pixel (14, 14)
    const xg::IdxData labels = xg::read_idx(kFixtures + "/idx/t10k-first5-labels-idx1-ubyte.gz");
    REQUIRE(labels.shape == std::vector<std::size_t>{5});
    CHECK(labels.bytes == std::vector<std::uint8_t>{9, 2, 1, 1, 6});

    TempDir dir;
    const std::string plain = idx_bytes(0x08, {5}, std::string(labels.bytes.begin(), labels.bytes.end()));
    CHECK(xg::read_idx(dir.write("plain-idx1", plain)).bytes == labels.bytes);
    CHECK(xg::parse_idx(plain, "memory").shape == labels.shape);
    CHECK(xg::parse_idx(idx_bytes(0x08, {0, 3}, ""), "memory").bytes.empty());
}

TEST_CASE("bad IDX files raise xg::Error naming the file and the problem", "[io]") {
    TempDir dir;
    const auto read = [&](const std::string& name, const std::string& bytes) { xg::read_idx(dir.write(name, bytes)); };
    const std::string data6(6, '\x01');

    REQUIRE_THROWS_WITH(xg::read_idx(dir.file("missing.gz")), Contains("read_idx") && Contains("missing.gz"));
    REQUIRE_THROWS_WITH(read("float-idx", idx_bytes(0x0D, {6}, data6 + data6 + data6 + data6)),
                        Contains("float-idx") && Contains("unsupported IDX type 0x0d (float32)"));
    REQUIRE_THROWS_WITH(read("magic-idx", "\x01\x02\x08\x01" + be32(6) + data6),
                        Contains("magic-idx") && Contains("not an IDX file"));
    REQUIRE_THROWS_WITH(read("short-idx", idx_bytes(0x08, {2, 3}, data6.substr(0, 4))),
                        Contains("short-idx") && Contains("truncated IDX data") && Contains("(2, 3)") &&
                            Contains("needs 6 bytes, found 4"));
    REQUIRE_THROWS_WITH(read("long-idx", idx_bytes(0x08, {2, 3}, data6 + "ab")),
                        Contains("long-idx") && Contains("2 unexpected bytes"));
    REQUIRE_THROWS_WITH(read("header-idx", std::string("\0\0\x08\x03", 4) + be32(5)),
                        Contains("header-idx") && Contains("truncated IDX header"));
    REQUIRE_THROWS_WITH(read("zero-idx", std::string("\0\0\x08\0", 4)), Contains("declares 0 dimensions"));
    REQUIRE_THROWS_WITH(read("tiny-idx", std::string("\0\0", 2)), Contains("tiny-idx") && Contains("truncated IDX header"));
    // A header promising ~2^40 bytes must fail as truncated, not try to allocate them.
    REQUIRE_THROWS_WITH(read("liar-idx", idx_bytes(0x08, {0xFFFFFFFFu, 0xFFu}, data6)),
                        Contains("liar-idx") && Contains("truncated IDX data"));
    REQUIRE_THROWS_WITH(xg::parse_idx(idx_bytes(0x08, {0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu}, ""), "memory"),
                        Contains("absurd IDX shape"));

    const std::string gz = xg::read_file_bytes(kFixtures + "/idx/t10k-first5-images-idx3-ubyte.gz", "test");
    REQUIRE_THROWS_WITH(read("cut-idx3.gz", gz.substr(0, gz.size() / 2)),
                        Contains("cut-idx3.gz") && (Contains("truncated") || Contains("corrupt")));
    std::string flipped = gz;
    flipped[gz.size() / 2] = static_cast<char>(flipped[gz.size() / 2] ^ 0x55);
    REQUIRE_THROWS_WITH(read("flip-idx3.gz", flipped), Contains("flip-idx3.gz") && Contains("gzip"));
}

TEST_CASE("real Fashion-MNIST t10k files load with the documented shapes", "[io]") {
    const std::string root = "/usr/share/datasets/fashion-mnist/";
    if (!fs::exists(root + "t10k-images-idx3-ubyte.gz") || !fs::exists(root + "t10k-labels-idx1-ubyte.gz")) {
        WARN("Fashion-MNIST not installed under " << root << " (Debian package dataset-fashion-mnist); skipped");
        return;
    }
    const xg::IdxData images = xg::read_idx(root + "t10k-images-idx3-ubyte.gz");
    CHECK(images.shape == std::vector<std::size_t>{10000, 28, 28});
    const xg::IdxData labels = xg::read_idx(root + "t10k-labels-idx1-ubyte.gz");
    CHECK(labels.shape == std::vector<std::size_t>{10000});
    CHECK(std::all_of(labels.bytes.begin(), labels.bytes.end(), [](std::uint8_t label) { return label < 10; }));
    const xg::IdxData sample = xg::read_idx(kFixtures + "/idx/t10k-first5-images-idx3-ubyte.gz");
    CHECK(std::equal(sample.bytes.begin(), sample.bytes.end(), images.bytes.begin()));
}

TEST_CASE("a save that fails midway leaves the previous file intact and no temporary behind", "[io]") {
    TempDir dir;
    const std::string path = dir.file("weights.npy");
    const xg::Array old_value{1.0, 2.0, 3.0};
    xg::save_npy(path, old_value);
    const std::string new_bytes = xg::npy_bytes(xg::Array::from_shape({1000}));

    // The writer dies halfway through writing the new contents (a crash or full disk).
    REQUIRE_THROWS_WITH(xg::write_file_atomic(path,
                                              [&](const std::string& tmp) {
                                                  xg::write_file_bytes_atomic(tmp, new_bytes.substr(0, 500), "test");
                                                  throw std::runtime_error("simulated failure mid-save");
                                              }),
                        Contains("simulated failure"));
    CHECK(same_values(xg::load_npy(path), old_value));
    CHECK(dir.entry_count() == 1);

    // Renaming over a directory fails after the data was written: same guarantees.
    fs::create_directory(dir.file("taken.npz"));
    REQUIRE_THROWS_WITH(xg::save_npz(dir.file("taken.npz"), {{"a", old_value}}),
                        Contains("save_npz") && Contains("taken.npz"));
    CHECK(dir.entry_count() == 2);
    REQUIRE_THROWS_WITH(xg::save_npy(dir.file("no/such/dir/w.npy"), old_value),
                        Contains("save_npy") && Contains("no/such/dir/w.npy"));

    xg::save_npy(path, xg::Array{9.0});  // a successful save replaces the file
    CHECK(same_values(xg::load_npy(path), xg::Array{9.0}));
    CHECK(dir.entry_count() == 2);
}

}  // namespace xg_test_io
