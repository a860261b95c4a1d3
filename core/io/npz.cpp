// .npz archives (a zip of .npy entries) through libzip, entirely in memory so the same code
// serves files, checkpoints and the fuzzer.
#include "core/io/io.hpp"

#include <cmath>
#include <cstdio>
#include <ctime>
#include <memory>
#include <set>

#include <fmt/format.h>
#include <zip.h>

namespace xg {

namespace {

// Entries get a fixed timestamp so saving the same arrays twice gives identical bytes.
constexpr std::time_t kEntryTime = 946684800;  // 2000-01-01
// Deflate cannot expand data by more than ~1032:1; a larger claimed size is a zip bomb or corrupt.
constexpr zip_uint64_t kMaxDeflateRatio = 1100;

std::string libzip_message(int code) {
    zip_error_t error;
    zip_error_init_with_code(&error, code);
    std::string message = zip_error_strerror(&error);
    zip_error_fini(&error);
    return message;
}

struct ArchiveCloser {
    void operator()(zip_t* archive) const { zip_discard(archive); }
};
using Archive = std::unique_ptr<zip_t, ArchiveCloser>;
struct EntryCloser {
    void operator()(zip_file_t* entry) const { zip_fclose(entry); }
};
using Entry = std::unique_ptr<zip_file_t, EntryCloser>;
struct SourceFreer {
    void operator()(zip_source_t* source) const { zip_source_free(source); }
};
using Source = std::unique_ptr<zip_source_t, SourceFreer>;

// Opens `bytes` as a read-only archive; libzip keeps pointing into `bytes`.
Archive open_archive(const std::string& bytes, const std::string& what) {
    if (bytes.empty()) fail("load_npz", fmt::format("{}: empty file, not a zip archive", what));
    zip_error_t error;
    zip_error_init(&error);
    Source source(zip_source_buffer_create(bytes.data(), bytes.size(), 0, &error));
    if (!source) fail("load_npz", fmt::format("{}: {}", what, zip_error_strerror(&error)));
    Archive archive(zip_open_from_source(source.get(), ZIP_RDONLY | ZIP_CHECKCONS, &error));
    if (!archive) {
        const bool duplicates = zip_error_code_zip(&error) == ZIP_ER_EXISTS;
        const std::string message = zip_error_strerror(&error);
        zip_error_fini(&error);
        if (duplicates) fail("load_npz", fmt::format("{}: duplicate entry names in the zip archive", what));
        fail("load_npz", fmt::format("{}: not a valid zip archive ({})", what, message));
    }
    source.release();  // the archive owns it now
    return archive;
}

std::string read_entry(zip_t* archive, zip_uint64_t index, const zip_stat_t& stat, const std::string& what,
                       std::size_t archive_size) {
    const std::string entry_what = fmt::format("{} entry '{}'", what, stat.name);
    if (stat.comp_size > archive_size || stat.size > stat.comp_size * kMaxDeflateRatio + 4096)
        fail("load_npz", fmt::format("{}: implausible sizes ({} bytes from {} compressed in a {}-byte file)",
                                     entry_what, stat.size, stat.comp_size, archive_size));
    Entry entry(zip_fopen_index(archive, index, 0));
    if (!entry) fail("load_npz", fmt::format("{}: cannot open: {}", entry_what, zip_strerror(archive)));
    std::string data(stat.size, '\0');
    std::size_t got = 0;
    while (got < data.size()) {
        const zip_int64_t n = zip_fread(entry.get(), data.data() + got, data.size() - got);
        if (n < 0) fail("load_npz", fmt::format("{}: {}", entry_what, zip_file_strerror(entry.get())));
        if (n == 0)
            fail("load_npz", fmt::format("{}: truncated: expected {} bytes, got {}", entry_what, data.size(), got));
        got += static_cast<std::size_t>(n);
    }
    // Reading past the end is what makes libzip verify the CRC.
    char extra;
    const zip_int64_t n = zip_fread(entry.get(), &extra, 1);
    if (n < 0) fail("load_npz", fmt::format("{}: {}", entry_what, zip_file_strerror(entry.get())));
    if (n > 0) fail("load_npz", fmt::format("{}: longer than its declared {} bytes", entry_what, data.size()));
    const int close_error = zip_fclose(entry.release());
    if (close_error != 0) fail("load_npz", fmt::format("{}: {}", entry_what, libzip_message(close_error)));
    return data;
}

// Reads back everything written to an in-memory zip source.
std::string source_contents(zip_source_t* source) {
    if (zip_source_open(source) != 0)
        fail("save_npz", fmt::format("cannot read the archive back: {}", zip_error_strerror(zip_source_error(source))));
    std::string out;
    char buffer[1 << 16];
    zip_int64_t n;
    while ((n = zip_source_read(source, buffer, sizeof buffer)) > 0) out.append(buffer, static_cast<std::size_t>(n));
    const bool failed = n < 0;
    const std::string message = failed ? zip_error_strerror(zip_source_error(source)) : "";
    zip_source_close(source);
    if (failed) fail("save_npz", fmt::format("cannot read the archive back: {}", message));
    return out;
}

// An entry to be written as int64: every value must be a whole number an int64 holds.
IndexArray whole_numbers(const Array& a, const std::string& key) {
    IndexArray out = IndexArray::from_shape(a.shape());
    for (std::size_t i = 0; i < a.size(); ++i) {
        const double v = a.data()[i];
        if (!(v == std::floor(v) && std::fabs(v) < 9223372036854775808.0)) {
            fail("save_npz", fmt::format("entry '{}' is saved as int64 but holds {} at flat position {}", key, v, i));
        }
        out.data()[i] = static_cast<std::int64_t>(v);
    }
    return out;
}

}  // namespace

std::string npz_bytes(const NamedArrays& arrays, bool compress, const Int64Keys& int64_keys,
                      const Float32Keys& float32_keys) {
    // libzip writes nothing at all for an archive without entries; NumPy writes the bare
    // end-of-central-directory record, so do the same.
    if (arrays.empty()) return std::string("PK\x05\x06", 4) + std::string(18, '\0');

    std::set<std::string> keys;
    for (const auto& [key, array] : arrays) {
        if (key.empty()) fail("save_npz", "array keys must not be empty");
        if (key.find('\0') != std::string::npos) fail("save_npz", "array keys must not contain NUL characters");
        if (!keys.insert(key).second) fail("save_npz", fmt::format("duplicate array key '{}'", key));
        if (int64_keys.count(key) && float32_keys.count(key))
            fail("save_npz", fmt::format("entry '{}' is asked to be saved both as int64 and as float32", key));
    }

    zip_error_t error;
    zip_error_init(&error);
    Source out(zip_source_buffer_create(nullptr, 0, 0, &error));
    if (!out) fail("save_npz", fmt::format("cannot create an in-memory archive: {}", zip_error_strerror(&error)));
    zip_source_keep(out.get());  // so zip_close leaves it for us to read back
    Archive archive(zip_open_from_source(out.get(), ZIP_TRUNCATE, &error));
    if (!archive) {
        zip_source_free(out.get());  // undo the keep
        fail("save_npz", fmt::format("cannot create an in-memory archive: {}", zip_error_strerror(&error)));
    }

    // libzip reads the entry buffers only in zip_close, so they must outlive the loop.
    std::vector<std::string> payloads;
    payloads.reserve(arrays.size());
    for (const auto& [key, array] : arrays) {
        payloads.push_back(int64_keys.count(key)     ? npy_bytes(whole_numbers(array, key))
                           : float32_keys.count(key) ? npy_bytes(array, Dtype::Float32)
                                                     : npy_bytes(array));
        const std::string name = key + ".npy";
        zip_source_t* entry = zip_source_buffer(archive.get(), payloads.back().data(), payloads.back().size(), 0);
        if (!entry) fail("save_npz", fmt::format("entry '{}': {}", name, zip_strerror(archive.get())));
        const zip_int64_t index = zip_file_add(archive.get(), name.c_str(), entry, ZIP_FL_ENC_UTF_8);
        if (index < 0) {
            zip_source_free(entry);
            fail("save_npz", fmt::format("entry '{}': {}", name, zip_strerror(archive.get())));
        }
        const auto i = static_cast<zip_uint64_t>(index);
        if (zip_set_file_compression(archive.get(), i, compress ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0) != 0 ||
            zip_file_set_mtime(archive.get(), i, kEntryTime, 0) != 0)
            fail("save_npz", fmt::format("entry '{}': {}", name, zip_strerror(archive.get())));
    }
    if (zip_close(archive.get()) != 0)
        fail("save_npz", fmt::format("cannot finish the archive: {}", zip_strerror(archive.get())));
    archive.release();  // zip_close freed it
    return source_contents(out.get());
}

void save_npz(const std::string& path, const NamedArrays& arrays, bool compress, const Int64Keys& int64_keys,
              const Float32Keys& float32_keys) {
    write_file_bytes_atomic(path, npz_bytes(arrays, compress, int64_keys, float32_keys), "save_npz");
}

namespace {
// Calls parse(key, entry bytes, entry description) for every '<key>.npy' entry, in order.
template <class Parse>
void for_each_entry(const std::string& bytes, const std::string& what, Parse parse) {
    Archive archive = open_archive(bytes, what);
    const zip_int64_t count = zip_get_num_entries(archive.get(), 0);
    if (count < 0) fail("load_npz", fmt::format("{}: cannot list entries: {}", what, zip_strerror(archive.get())));

    std::set<std::string> keys;
    for (zip_uint64_t i = 0; i < static_cast<zip_uint64_t>(count); ++i) {
        zip_stat_t stat;
        zip_stat_init(&stat);
        const zip_uint64_t needed = ZIP_STAT_NAME | ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE;
        if (zip_stat_index(archive.get(), i, 0, &stat) != 0 || (stat.valid & needed) != needed)
            fail("load_npz", fmt::format("{}: cannot read entry {}: {}", what, i, zip_strerror(archive.get())));
        const std::string name = stat.name;
        const std::string suffix = ".npy";
        if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
            fail("load_npz", fmt::format("{}: entry '{}' is not a '<key>.npy' array", what, name));
        const std::string key = name.substr(0, name.size() - suffix.size());
        if (!keys.insert(key).second) fail("load_npz", fmt::format("{}: duplicate entry '{}'", what, name));
        const std::string data = read_entry(archive.get(), i, stat, what, bytes.size());
        parse(key, data, fmt::format("{} entry '{}'", what, name));
    }
}
}  // namespace

NamedArrays load_npz_bytes(const std::string& bytes, const std::string& what) {
    NamedArrays out;
    for_each_entry(bytes, what, [&](const std::string& key, const std::string& data, const std::string& entry) {
        out.emplace_back(key, parse_npy(data, entry, "load_npz"));
    });
    return out;
}

NamedTensors load_npz_tensors_bytes(const std::string& bytes, const std::string& what) {
    NamedTensors out;
    for_each_entry(bytes, what, [&](const std::string& key, const std::string& data, const std::string& entry) {
        out.emplace_back(key, parse_npy_tensor(data, entry, "load_npz"));
    });
    return out;
}

NamedTensors load_npz_tensors(const std::string& path) {
    return load_npz_tensors_bytes(read_file_bytes(path, "load_npz"), "'" + path + "'");
}

void save_npz_tensors(const std::string& path, const NamedTensors& tensors, bool compress) {
    NamedArrays arrays;
    Float32Keys float32_keys;
    for (const auto& [key, tensor] : tensors) {
        if (!tensor.defined()) fail("save_npz", fmt::format("entry '{}' is an undefined tensor", key));
        arrays.emplace_back(key, tensor.value());
        if (tensor.dtype() == Dtype::Float32) float32_keys.insert(key);
    }
    write_file_bytes_atomic(path, npz_bytes(arrays, compress, {}, float32_keys), "save_npz");
}

NamedArrays load_npz(const std::string& path) {
    return load_npz_bytes(read_file_bytes(path, "load_npz"), "'" + path + "'");
}

}  // namespace xg
