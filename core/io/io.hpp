// File I/O: NumPy .npy/.npz arrays, IDX datasets (MNIST / Fashion-MNIST) and atomic saves.
//
// Every loader is strict: a malformed, truncated or unsupported file throws xg::Error naming the
// operation, the file and the problem; nothing is guessed or silently converted lossily.
// The parse_* / *_bytes functions work on in-memory bytes so fuzzers can drive the same code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <xtensor/xarray.hpp>

#include "core/engine/tensor.hpp"

namespace xg {

/// An int64 array, for index / target fixtures.
using IndexArray = xt::xarray<std::int64_t>;

// ---- .npy -------------------------------------------------------------------------------------
// Written as format 1.0 (2.0 only for huge headers), little-endian, C order: '<f8' for Array (or
// '<f4' when asked for float32, as for a float32 Tensor) and '<i8' for IndexArray. Read: versions
// 1.0-3.0, C order, dtypes '<f8' '<f4' '<i8' '<i4'. The Array readers widen every dtype to double
// (exactly); the Tensor readers keep '<f4' as a float32 tensor.

/// The complete .npy file contents of `a`: '<f8', or '<f4' for Dtype::Float32 (each value rounded
/// to the nearest float32, as a float32 store; a float32 tensor's values are unchanged).
std::string npy_bytes(const Array& a, Dtype dtype = Dtype::Float64);
/// The complete .npy file contents of `a` as '<i8'.
std::string npy_bytes(const IndexArray& a);

/// Parses .npy bytes into doubles. '<i8' values beyond 2^53 that a double cannot hold exactly
/// are rejected. `what` names the source in error messages (a path, "'x.npz' entry 'w.npy'") and
/// `op` the operation they blame.
Array parse_npy(const std::string& bytes, const std::string& what, const std::string& op = "load_npy");
/// Parses .npy bytes into a leaf tensor that keeps the file's floating dtype, as torch.from_numpy:
/// '<f4' gives a float32 tensor, '<f8' a float64 one; integer dtypes give a float64 tensor of the
/// same whole numbers (checked as parse_npy does).
Tensor parse_npy_tensor(const std::string& bytes, const std::string& what, const std::string& op = "load_npy");
/// Parses .npy bytes of an integer dtype ('<i8' or '<i4'); float dtypes are rejected.
IndexArray parse_npy_int64(const std::string& bytes, const std::string& what);

/// Saves `a` as npy_bytes(a, dtype), atomically (see write_file_atomic).
void save_npy(const std::string& path, const Array& a, Dtype dtype = Dtype::Float64);
/// Saves an int64 array as '<i8', atomically.
void save_npy(const std::string& path, const IndexArray& a);
/// Saves the tensor's value in its dtype: '<f4' for a float32 tensor, '<f8' for a float64 one.
void save_npy(const std::string& path, const Tensor& t);

/// Reads a .npy file as doubles (see parse_npy); throws xg::Error naming the file on any problem.
Array load_npy(const std::string& path);
/// Reads a .npy file as a tensor of the file's floating dtype (see parse_npy_tensor).
Tensor load_npy_tensor(const std::string& path);
/// Reads an integer .npy file (see parse_npy_int64); throws xg::Error naming the file.
IndexArray load_npy_int64(const std::string& path);

// ---- .npz -------------------------------------------------------------------------------------
// A zip of '<key>.npy' entries, as numpy.savez writes and numpy.load reads. Entry order is kept.

/// Arrays keyed by name, in order: the one name -> array type of the library. An .npz file's
/// contents, Module::state_dict(), an optimizer's, a scheduler's or a DataLoader's state_dict,
/// and a checkpoint are all NamedArrays.
using NamedArrays = std::vector<std::pair<std::string, Array>>;

/// Keys of .npz entries written as '<i8' instead of '<f8': how a state_dict keeps PyTorch's
/// int64 buffers (BatchNorm's num_batches_tracked) int64 in the file. Their values must be whole
/// numbers; readers convert them back to doubles.
using Int64Keys = std::set<std::string>;

/// Keys of .npz entries written as '<f4' instead of '<f8': how a float32 model's state_dict and
/// the optimizer state of its parameters stay float32 in the file (Module::float32_keys).
using Float32Keys = std::set<std::string>;

/// The complete .npz file contents. Keys must be non-empty and unique; dots are fine
/// ("blocks.0.ln.weight"). `compress` deflates entries like numpy.savez_compressed. Entries named
/// in `int64_keys` are written as int64 (a value that is not a whole number throws), those in
/// `float32_keys` as float32 (each value rounded to the nearest float32); a key in both throws.
std::string npz_bytes(const NamedArrays& arrays, bool compress = false, const Int64Keys& int64_keys = {},
                      const Float32Keys& float32_keys = {});
/// Saves atomically (see write_file_atomic).
void save_npz(const std::string& path, const NamedArrays& arrays, bool compress = false,
              const Int64Keys& int64_keys = {}, const Float32Keys& float32_keys = {});

/// Parses .npz bytes; `what` names the source in error messages.
NamedArrays load_npz_bytes(const std::string& bytes, const std::string& what);
/// Reads an .npz file (stored or deflated `<key>.npy` entries); throws xg::Error naming the
/// file and entry on any problem.
NamedArrays load_npz(const std::string& path);

/// Tensors keyed by name, in order (what Module::named_parameters() returns).
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
/// Saves each tensor's value in its own dtype ('<f4' for float32, '<f8' for float64), atomically.
void save_npz_tensors(const std::string& path, const NamedTensors& tensors, bool compress = false);
/// Parses .npz bytes into leaf tensors that keep each entry's floating dtype (see parse_npy_tensor).
NamedTensors load_npz_tensors_bytes(const std::string& bytes, const std::string& what);
/// Reads an .npz file into leaf tensors that keep each entry's floating dtype ('<f4' float32).
NamedTensors load_npz_tensors(const std::string& path);

// ---- IDX (MNIST / Fashion-MNIST) --------------------------------------------------------------

/// An unsigned-byte IDX array: `bytes` holds the product of `shape` values in row-major order.
struct IdxData {
    /// Extents, outermost first (e.g. (60000, 28, 28) for images).
    std::vector<std::size_t> shape;
    /// The values in row-major order.
    std::vector<std::uint8_t> bytes;
};

/// Reads an IDX file of unsigned bytes (type code 0x08), gzip-compressed or plain.
IdxData read_idx(const std::string& path);
/// Parses uncompressed IDX bytes; `what` names the source in error messages.
IdxData parse_idx(const std::string& bytes, const std::string& what);

// ---- files ------------------------------------------------------------------------------------

/// The whole contents of a file; `op` names the caller in the error raised when it cannot be read.
std::string read_file_bytes(const std::string& path, const std::string& op);

/// Replaces the file `path` by `bytes` with write_file_atomic.
void write_file_bytes_atomic(const std::string& path, const std::string& bytes, const std::string& op);

/// Replaces `path` all-or-nothing: `writer` writes the new contents to `tmp_path` (a fresh file
/// in the same directory), which is then fsynced and renamed over `path`, and the directory is
/// fsynced. If `writer` throws or any step fails, the temporary file is removed, `path` keeps
/// its old contents, and the exception propagates (system failures as xg::Error naming `op`).
void write_file_atomic(const std::string& path,
                       const std::function<void(const std::string& tmp_path)>& writer,
                       const std::string& op = "write_file_atomic");

}  // namespace xg
