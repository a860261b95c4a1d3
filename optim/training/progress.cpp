#include "optim/training/progress.hpp"

#include <cmath>
#include <unistd.h>

#include <fmt/format.h>

#include "core/engine/tensor.hpp"

namespace xg::optim {

std::string format_duration(double seconds) {
    if (!std::isfinite(seconds) || seconds < 0) return "?:??";
    const auto s = static_cast<long long>(std::llround(seconds));
    if (s >= 3600) return fmt::format("{}:{:02d}:{:02d}", s / 3600, (s / 60) % 60, s % 60);
    return fmt::format("{}:{:02d}", s / 60, s % 60);
}

ProgressBar::ProgressBar(std::int64_t total, std::string label, Mode mode, std::FILE* out)
    : total_(static_cast<std::size_t>(total)), label_(std::move(label)), out_(out),
      start_(std::chrono::steady_clock::now()), last_draw_(start_) {
    if (total < 0) fail("ProgressBar", fmt::format("total must be non-negative, got {}", total));
    terminal_ = mode == Mode::terminal || (mode == Mode::automatic && out_ && isatty(fileno(out_)));
}

ProgressBar::~ProgressBar() {
    // A destructor must not throw; a failed final write is not worth terminating for.
    try {
        finish();
    } catch (...) {
    }
}

double ProgressBar::elapsed_seconds() const {
    // Frozen at the last step, so evaluation after the epoch does not count as training time.
    const auto stop = done_ >= total_ && total_ > 0 ? end_ : std::chrono::steady_clock::now();
    return std::chrono::duration<double>(stop - start_).count();
}

std::string ProgressBar::line() const {
    constexpr std::size_t width = 20;
    const std::size_t filled = total_ ? std::min(width, done_ * width / total_) : width;
    const double elapsed = elapsed_seconds();
    const double rate = elapsed > 0 ? static_cast<double>(done_) / elapsed : 0.0;
    const double eta = rate > 0 && total_ > done_ ? static_cast<double>(total_ - done_) / rate : 0.0;
    std::string out = label_.empty() ? "" : label_ + " ";
    out += fmt::format("[{}{}] {}/{}  {:.1f} it/s  ", std::string(filled, '#'), std::string(width - filled, '.'), done_,
                       total_, rate);
    out += done_ < total_ ? "ETA " + format_duration(eta) : "took " + format_duration(elapsed);
    if (done_) out += fmt::format("  loss {:.4f}", mean_loss());
    return out;
}

void ProgressBar::update(double loss) {
    if (done_ >= total_) {
        fail("ProgressBar", fmt::format("update() called after all {} steps of '{}' were done", total_, label_));
    }
    ++done_;
    loss_sum_ += loss;
    if (done_ == total_) end_ = std::chrono::steady_clock::now();
    if (!terminal_ || !out_) return;
    const auto now = std::chrono::steady_clock::now();
    if (done_ < total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    // \033[K clears what a longer previous line left behind.
    fmt::print(out_, "\r{}\033[K", line());
    std::fflush(out_);
}

void ProgressBar::finish(const std::string& extra) {
    if (finished_) return;
    finished_ = true;
    if (!out_) return;
    const std::string text = line() + (extra.empty() ? "" : "  " + extra);
    if (terminal_) fmt::print(out_, "\r{}\033[K\n", text);
    else fmt::print(out_, "{}\n", text);
    std::fflush(out_);
}

// ---- CsvLogger ----------------------------------------------------------------------------

namespace {

std::string join(const std::vector<std::string>& items) {
    std::string out;
    for (std::size_t i = 0; i < items.size(); ++i) out += (i ? "," : "") + items[i];
    return out;
}

}  // namespace

CsvLogger::CsvLogger(const std::string& path, std::vector<std::string> columns, bool append)
    : path_(path), columns_(std::move(columns)) {
    if (columns_.empty()) fail("CsvLogger", "at least one column is needed");
    for (const std::string& c : columns_) {
        if (c.empty() || c.find_first_of(",\"\n\r") != std::string::npos) {
            fail("CsvLogger", fmt::format("column name '{}' is empty or contains a comma, quote or newline", c));
        }
    }
    const std::string header = join(columns_);
    bool write_header = true;
    if (append) {
        std::ifstream existing(path);
        std::string first_line;
        if (existing && std::getline(existing, first_line)) {
            if (first_line != header) {
                fail("CsvLogger", fmt::format("{} has header '{}' but this run logs '{}'", path, first_line, header));
            }
            write_header = false;
        }
    }
    file_.open(path, append ? std::ios::app : std::ios::trunc);
    if (!file_) fail("CsvLogger", fmt::format("cannot open {} for writing", path));
    if (write_header) file_ << header << '\n' << std::flush;
}

void CsvLogger::log(const std::vector<double>& values) {
    if (values.size() != columns_.size()) {
        fail("CsvLogger.log", fmt::format("{} values for the {} columns ({}) of {}", values.size(), columns_.size(),
                                          join(columns_), path_));
    }
    std::string row;
    for (std::size_t i = 0; i < values.size(); ++i) row += fmt::format("{}{}", i ? "," : "", values[i]);
    file_ << row << '\n' << std::flush;
    if (!file_) fail("CsvLogger.log", fmt::format("writing to {} failed", path_));
}

}  // namespace xg::optim
