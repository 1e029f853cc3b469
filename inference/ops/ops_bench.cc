// ops_bench: throughput of the MatMul kernels and of memory on this machine.
// Not a test. Usage: [RINGLM_CPU_TARGET=NAME] ops_bench [-t THREADS] [-r REPS]
// [--type NAME]
//
// For each weight type and shape (rows x cols, tinyllama's FFN and attention
// shapes) it prints matrix-vector time and the weight bytes streamed per
// second (decode is bound by this), and 128-token matrix-matrix GFLOPS
// (prefill). The memory lines give read and memcpy bandwidth over 256 MiB
// (and the read in a 4-row decode tile's order, see MemoryLines), and the
// "decode from memory" lines the matrix-vector rate over weights
// too large for the caches, as a share of that read bandwidth.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "inference/ops/cpu_target.h"
#include "inference/ops/matmul.h"
#include "inference/ops/matmul_internal.h"
#include "inference/ops/quant.h"
#include "inference/ops/thread_pool.h"

namespace ringlm {
namespace {

// Whether `type` is measured: every type, or the one --type names
// (case-insensitive, e.g. q4_0).
std::string g_only_type;
bool Measured(TensorType type) {
  if (g_only_type.empty()) return true;
  std::string name(TraitsOf(type).name);
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name == g_only_type;
}

// The layout each matrix is measured in: the one a model's weights get on
// this CPU (FastestLayout), or GGUF's with --layout gguf.
bool g_gguf_layout = false;

// Puts the GGUF rows of `w` into the layout measured; returns it.
WeightLayout Lay(TensorType type, int64_t rows, int64_t cols, std::vector<uint8_t>& w) {
  const WeightLayout layout = g_gguf_layout ? WeightLayout::kGguf : FastestLayout(type, rows);
  if (layout == WeightLayout::kQ4_0x8) {
    std::vector<uint8_t> packed(w.size());
    PackQ4_0x8(w.data(), rows, cols, packed.data());
    w = std::move(packed);
  }
  return layout;
}

std::string NameIn(TensorType type, WeightLayout layout) {
  return std::string(TraitsOf(type).name) + (layout == WeightLayout::kQ4_0x8 ? "x8" : "");
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Best of `reps` timings of fn(), in seconds.
template <typename Fn>
double BestOf(int reps, Fn&& fn) {
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    const double t0 = Now();
    fn();
    best = std::min(best, Now() - t0);
  }
  return best;
}

// Sums the `n` words at p, reading them in one of two orders: front to back
// (kRows == 1), or as a decode tile of kRows weight rows of kRowWords each
// does: 64 bytes of each row in turn, with the kernels' PrefetchAhead of the
// rows kPrefetchAheadRows further on.
constexpr size_t kRowWords = 512;  // 4 KiB: a row of 2048 F16 weights
template <int kRows>
uint64_t SumWords(const uint64_t* p, size_t n) {
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  constexpr size_t tile = kRows * kRowWords;
  for (size_t t = 0; t + tile <= n; t += tile) {
    for (size_t k = 0; k < kRowWords; k += 8) {
      if constexpr (kRows > 1) {
        PrefetchAhead<64 * kRows>(
            reinterpret_cast<const uint8_t*>(p + t + kPrefetchAheadRows * kRowWords + k * kRows));
      }
      for (int r = 0; r < kRows; ++r) {
        const uint64_t* q = p + t + r * kRowWords + k;
        s0 += q[0] + q[4];
        s1 += q[1] + q[5];
        s2 += q[2] + q[6];
        s3 += q[3] + q[7];
      }
    }
  }
  return s0 + s1 + s2 + s3;
}

// Prints the memory lines; returns the read bandwidth with the pool's threads.
// "4 rows at once" reads the same bytes in a 4-row decode tile's order (the
// float decode kernels walk 4 rows side by side, the Q8_0/Q4_0 ones 8):
// where it is well below the plain read, decode is held there by the access
// pattern, not by the bandwidth.
double MemoryLines(ThreadPool& pool, int reps) {
  const size_t bytes = size_t{256} << 20;
  std::vector<uint64_t> src(bytes / 8, 1), dst(bytes / 8, 0);
  double read_gbs = 0.0;
  for (int threads : {1, pool.n_threads()}) {
    ThreadPool local(threads);
    const size_t n = src.size() / threads;
    volatile uint64_t sink = 0;
    const auto read_seconds = [&](auto sum_words) {
      return BestOf(reps, [&] {
        std::vector<uint64_t> partial(threads, 0);
        local.ParallelFor(threads, [&](int64_t b, int64_t e) {
          for (int64_t c = b; c < e; ++c) partial[c] = sum_words(src.data() + c * n, n);
        });
        for (uint64_t v : partial) sink = sink + v;
      });
    };
    const double t_read = read_seconds(&SumWords<1>);
    const double t_rows = read_seconds(&SumWords<4>);
    const double t_copy = BestOf(reps, [&] {
      local.ParallelFor(threads, [&](int64_t b, int64_t e) {
        for (int64_t c = b; c < e; ++c) std::memcpy(dst.data() + c * n, src.data() + c * n, n * 8);
      });
    });
    std::printf(
        "memory  %d thread(s): read %6.1f GB/s   4 rows at once %6.1f GB/s   memcpy %6.1f GB/s "
        "(read+write)\n",
        threads, bytes / t_read / 1e9, bytes / t_rows / 1e9, 2.0 * bytes / t_copy / 1e9);
    read_gbs = bytes / t_read / 1e9;
  }
  return read_gbs;
}

// Decode's matrix-vector products as a model runs them: over copies of a
// 5632x2048 matrix that together exceed the caches (512 MiB), so every
// weight byte comes from memory, against the read bandwidth.
void FromMemoryLines(ThreadPool& pool, int reps, double read_gbs) {
  constexpr int64_t kRows = 5632, kCols = 2048;
  std::mt19937 rng(2);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> wf(kRows * kCols), x(kCols), y(kRows);
  for (float& v : wf) v = dist(rng);
  for (float& v : x) v = dist(rng);
  for (TensorType type : {TensorType::kF16, TensorType::kQ8_0, TensorType::kQ4_0, TensorType::kQ5_0,
                          TensorType::kQ4_1, TensorType::kQ5_1, TensorType::kQ2_K,
                          TensorType::kQ3_K, TensorType::kQ4_K, TensorType::kQ5_K,
                          TensorType::kQ6_K, TensorType::kIQ4_NL, TensorType::kIQ4_XS}) {
    if (!Measured(type)) continue;
    const size_t row_bytes = RowBytes(type, kCols);
    const size_t matrix_bytes = row_bytes * kRows;
    const size_t copies = ((size_t{512} << 20) + matrix_bytes - 1) / matrix_bytes;
    std::vector<uint8_t> w(matrix_bytes * copies);
    for (int64_t r = 0; r < kRows; ++r) {
      QuantizeRow(type, wf.data() + r * kCols, w.data() + r * row_bytes, kCols);
    }
    w.resize(matrix_bytes);
    const WeightLayout layout = Lay(type, kRows, kCols, w);
    w.resize(matrix_bytes * copies);
    for (size_t c = 1; c < copies; ++c) {
      std::memcpy(w.data() + c * matrix_bytes, w.data(), matrix_bytes);
    }
    const double t = BestOf(reps, [&] {
      for (size_t c = 0; c < copies; ++c) {
        MatMul(type, w.data() + c * matrix_bytes, kRows, kCols, x.data(), 1, y.data(), &pool,
               layout);
      }
    });
    const double gbs = w.size() / t / 1e9;
    std::printf("decode from memory  %-6s %7.1f GB/s  %5.1f%% of read\n",
                NameIn(type, layout).c_str(), gbs, 100.0 * gbs / read_gbs);
  }
}

}  // namespace
}  // namespace ringlm

int main(int argc, char** argv) {
  using namespace ringlm;
  int threads = DefaultThreadCount();
  int reps = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "-t") {
      threads = std::atoi(argv[i + 1]);
    } else if (flag == "-r") {
      reps = std::atoi(argv[i + 1]);
    } else if (flag == "--layout" &&
               (std::string(argv[i + 1]) == "gguf" || std::string(argv[i + 1]) == "fastest")) {
      g_gguf_layout = std::string(argv[i + 1]) == "gguf";
    } else if (flag == "--type") {
      g_only_type = argv[i + 1];
      for (char& c : g_only_type)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else {
      std::fprintf(stderr,
                   "usage: ops_bench [-t THREADS] [-r REPS] [--type NAME] [--layout gguf|fastest]\n"
                   "  --layout: weights as in the file, or (default) as a model on this CPU\n"
                   "  gets them (Q4_0 in groups of 8 rows where the kernels read that)\n");
      return 2;
    }
  }
  // RINGLM_CPU_TARGET measures another CPU's kernel path here.
  if (const absl::Status s = SetCpuTarget(CpuTargetFromEnvironment()); !s.ok()) {
    std::fprintf(stderr, "ops_bench: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  ThreadPool pool(threads);
  std::printf("ops_bench: %d thread(s), best of %d, cpu %s\n", pool.n_threads(), reps,
              ActiveCpuTargetName().c_str());
  const double read_gbs = MemoryLines(pool, reps);
  FromMemoryLines(pool, reps, read_gbs);

  struct Shape {
    int64_t rows, cols;
  };
  const Shape shapes[] = {{5632, 2048}, {2048, 5632}, {2048, 2048}};
  const TensorType types[] = {TensorType::kF32,  TensorType::kF16,    TensorType::kBF16,
                              TensorType::kQ8_0, TensorType::kQ4_0,   TensorType::kQ5_0,
                              TensorType::kQ4_1, TensorType::kQ5_1,   TensorType::kQ2_K,
                              TensorType::kQ3_K, TensorType::kQ4_K,   TensorType::kQ5_K,
                              TensorType::kQ6_K, TensorType::kIQ4_NL, TensorType::kIQ4_XS};
  constexpr int64_t kPrefillTokens = 128;
  std::printf("%-6s %-11s %10s %12s %14s\n", "type", "rows x cols", "matvec ms", "matvec GB/s",
              "mm128 GFLOPS");
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (const Shape& s : shapes) {
    std::vector<float> wf(s.rows * s.cols);
    for (float& v : wf) v = dist(rng);
    std::vector<float> x(kPrefillTokens * s.cols);
    for (float& v : x) v = dist(rng);
    std::vector<float> y(kPrefillTokens * s.rows);
    for (TensorType type : types) {
      if (!Measured(type)) continue;
      const size_t row_bytes = RowBytes(type, s.cols);
      std::vector<uint8_t> w(row_bytes * s.rows);
      for (int64_t r = 0; r < s.rows; ++r) {
        QuantizeRow(type, wf.data() + r * s.cols, w.data() + r * row_bytes, s.cols);
      }
      const WeightLayout layout = Lay(type, s.rows, s.cols, w);
      auto mv = [&] {
        MatMul(type, w.data(), s.rows, s.cols, x.data(), 1, y.data(), &pool, layout);
      };
      mv();  // warm up
      const double t_mv = BestOf(reps * 4, mv);
      // Best of `reps` after a warm-up call: one or two cold calls (first
      // touches of the scratch and outputs) read 30% low for some shapes.
      auto mm = [&] {
        MatMul(type, w.data(), s.rows, s.cols, x.data(), kPrefillTokens, y.data(), &pool, layout);
      };
      mm();
      const double t_mm = BestOf(reps, mm);
      const std::string shape = std::to_string(s.rows) + "x" + std::to_string(s.cols);
      std::printf("%-6s %-11s %10.3f %12.2f %14.2f\n", NameIn(type, layout).c_str(), shape.c_str(),
                  t_mv * 1e3, w.size() / t_mv / 1e9,
                  2.0 * s.rows * s.cols * kPrefillTokens / t_mm / 1e9);
    }
  }
  return 0;
}
