// A fresh directory under the system's temporary directory, removed with everything in it when
// the object goes: for the tests that write files (checkpoints, .npy/.npz, damaged files).
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

#include <unistd.h>

#include "core/io/io.hpp"

namespace xg::test {

struct TempDir {
    std::filesystem::path path;
    TempDir() {
        static int counter = 0;  // several per test, and per process: the pid keeps parallel ctest runs apart
        path = std::filesystem::temp_directory_path() /
               ("xgrad_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
        std::filesystem::remove_all(path);
        std::filesystem::create_directories(path);
    }
    ~TempDir() { std::filesystem::remove_all(path); }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    /// The path of `name` inside the directory.
    std::string file(const std::string& name) const { return (path / name).string(); }
    /// Writes raw bytes to `name`; returns its path.
    std::string write(const std::string& name, const std::string& bytes) const {
        write_file_bytes_atomic(file(name), bytes, "test");
        return file(name);
    }
    /// How many files and folders it holds (to see that an atomic write left no temporary behind).
    std::size_t entry_count() const {
        std::size_t n = 0;
        for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(path)) ++n;
        return n;
    }
};

}  // namespace xg::test
