// Console progress and metrics logging for training loops.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace xg::optim {

/// A one-line progress bar for one epoch:
///   epoch 2/5 [##########..........] 120/469  312.4 it/s  ETA 0:01  loss 0.5123
/// On a terminal it redraws in place with `\r` (at most ~10 times a second); otherwise (logs,
/// CI) it stays quiet and prints the final line once, from finish().
class ProgressBar {
public:
    /// Where to draw: automatic (terminal if `out` is a TTY, else quiet), terminal (redraw in place),
    /// quiet (only the final line).
    enum class Mode { automatic, terminal, quiet };

    /// `total` steps (non-negative, else xg::Error); `label` such as "epoch 2/5"; output goes to
    /// `out` (default stderr).
    ProgressBar(std::int64_t total, std::string label = "", Mode mode = Mode::automatic, std::FILE* out = stderr);
    ~ProgressBar();
    ProgressBar(const ProgressBar&) = delete;
    ProgressBar& operator=(const ProgressBar&) = delete;

    /// One step done; `loss` joins the running mean shown. Throws xg::Error once all `total` steps
    /// are done (a bar past its end would show "3/2" and a meaningless rate).
    void update(double loss);
    /// Ends the line (prints it once when not on a terminal); `extra` is appended, e.g.
    /// "test acc 0.8512". Called by the destructor if you do not.
    void finish(const std::string& extra = "");

    /// Steps done (calls to update()).
    std::size_t steps() const { return done_; }
    /// Mean of the losses passed to update().
    double mean_loss() const { return done_ ? loss_sum_ / static_cast<double>(done_) : 0.0; }
    /// Seconds from construction to now, or to the last step once all `total` are done.
    double elapsed_seconds() const;
    /// The current line (without `\r` or newline).
    std::string line() const;

private:
    std::size_t total_, done_ = 0;
    std::string label_;
    bool terminal_;
    std::FILE* out_;
    double loss_sum_ = 0.0;
    bool finished_ = false;
    std::chrono::steady_clock::time_point start_, last_draw_, end_;
};

/// "m:ss" or "h:mm:ss".
std::string format_duration(double seconds);

/// A CSV metrics file: a header row, then one row per log() call, flushed immediately so a
/// crashed run keeps every row written. With append = true an existing file with the same header
/// is continued (resumed runs); a different header is an error.
class CsvLogger {
public:
    /// Opens `path` and writes the header (unless continuing a file with append). Throws xg::Error
    /// for no columns, a column name with a comma, quote or newline, a file that cannot be
    /// opened, or (append) an existing file with a different header.
    CsvLogger(const std::string& path, std::vector<std::string> columns, bool append = false);
    /// One row; the number of values must match the columns. Numbers are written with up to 17
    /// significant digits (round-trip exact).
    void log(const std::vector<double>& values);
    /// The column names.
    const std::vector<std::string>& columns() const { return columns_; }
    /// The file written.
    const std::string& path() const { return path_; }

private:
    std::string path_;
    std::vector<std::string> columns_;
    std::ofstream file_;
};

}  // namespace xg::optim
