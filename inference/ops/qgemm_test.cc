// Bit-identity of the quantized GEMM (qgemm_internal.h): every output equals
// DotRowReference's bits whatever the batch size, chunking, tile position,
// thread count or kernel target.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "hwy/targets.h"
#include "inference/ops/fp16.h"
#include "inference/ops/matmul.h"
#include "inference/ops/qgemm_internal.h"
#include "inference/ops/quant.h"

namespace ringlm {
namespace {

constexpr QGemmKind kKinds[] = {QGemmKind::kQ8_0, QGemmKind::kQ4_0,   QGemmKind::kQ4_0Repacked,
                                QGemmKind::kQ5_0, QGemmKind::kIQ4_NL, QGemmKind::kQ4_0x8};

const char* KindName(QGemmKind kind) {
  switch (kind) {
    case QGemmKind::kQ8_0:
      return "q8_0";
    case QGemmKind::kQ4_0:
      return "q4_0";
    case QGemmKind::kQ4_0Repacked:
      return "q4_0 repacked";
    case QGemmKind::kQ5_0:
      return "q5_0";
    case QGemmKind::kIQ4_NL:
      return "iq4_nl";
    case QGemmKind::kQ4_0x8:
      return "q4_0x8";
  }
  return "?";
}

// Whether `kind` computes in ggml's repacked order (and needs rows % 8 == 0).
bool IsRepacked(QGemmKind kind) {
  return kind == QGemmKind::kQ4_0Repacked || kind == QGemmKind::kQ4_0x8;
}

struct Problem {
  QGemmKind kind;
  TensorType type;
  int64_t rows, cols, n_tokens;
  std::vector<uint8_t> w;  // kQ4_0x8: in that layout (weight_layout.h)
  std::vector<float> x;
  std::vector<float> ref;  // n_tokens x rows, from DotRowReference
  size_t row_bytes() const { return RowBytes(type, cols); }
};

// Random weights and activations with varied magnitudes (some rows and
// tokens tiny, some huge, some exactly zero), and the reference outputs.
// kQ4_0x8 takes rows down to a multiple of 8 (at least 8).
Problem MakeProblem(QGemmKind kind, int64_t rows, int64_t cols, int64_t n_tokens,
                    std::mt19937& rng) {
  const TensorType type = QGemmWeightType(kind);
  if (kind == QGemmKind::kQ4_0x8) rows = std::max<int64_t>(8, rows / 8 * 8);
  Problem p{kind, type, rows, cols, n_tokens, {}, {}, {}};
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> log_scale(-6.0f, 6.0f);
  std::vector<float> wf(cols);
  p.w.resize(p.row_bytes() * rows);
  for (int64_t r = 0; r < rows; ++r) {
    const float s = std::exp(log_scale(rng));
    for (float& v : wf) v = s * normal(rng);
    QuantizeRow(type, wf.data(), p.w.data() + r * p.row_bytes(), cols);
  }
  p.x.resize(n_tokens * cols);
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float s = std::exp(log_scale(rng));
    for (int64_t c = 0; c < cols; ++c) {
      // One block in seven is all zeros (scale 0).
      p.x[t * cols + c] = (c / 32) % 7 == 3 ? 0.0f : s * normal(rng);
    }
  }
  p.ref.resize(n_tokens * rows);
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      p.ref[t * rows + r] =
          DotRowReference(type, p.w.data() + r * p.row_bytes(), p.x.data() + t * cols, cols,
                          IsRepacked(kind) ? DotOrder::kRepacked : DotOrder::kVecDot);
    }
  }
  if (kind == QGemmKind::kQ4_0x8) {
    std::vector<uint8_t> packed(p.w.size());
    PackQ4_0x8(p.w.data(), rows, cols, packed.data());
    p.w = std::move(packed);
  }
  return p;
}

// Runs tokens [t0, t0 + n) of p through QGemm (or MatMul when target is
// kNone) and checks every output against the reference bits. MatMul computes
// Q4_0 repacked for a multiple of 8 rows, else in the lanes: a problem of the
// other kind tests the kernels alone.
void ExpectExact(const Problem& p, QGemmTarget target, int64_t t0, int64_t n, ThreadPool* pool,
                 const std::string& what) {
  std::vector<float> y(n * p.rows, NAN);
  const float* x = p.x.data() + t0 * p.cols;
  if (target == QGemmTarget::kNone) {
    const bool repacked = MatMulDotOrder(p.type, p.rows, p.cols, n) == DotOrder::kRepacked;
    if (repacked != IsRepacked(p.kind)) return;
    MatMul(p.type, p.w.data(), p.rows, p.cols, x, n, y.data(), pool,
           p.kind == QGemmKind::kQ4_0x8 ? WeightLayout::kQ4_0x8 : WeightLayout::kGguf);
  } else if (QGemmHasKind(target, p.kind)) {
    QGemm(target, p.kind, p.w.data(), p.rows, p.cols, x, n, y.data(), pool);
  } else {
    return;  // MatMul's per-dot kernels (the kNone rows) compute it here
  }
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t r = 0; r < p.rows; ++r) {
      ASSERT_EQ(std::bit_cast<uint32_t>(y[t * p.rows + r]),
                std::bit_cast<uint32_t>(p.ref[(t0 + t) * p.rows + r]))
          << what << " " << QGemmTargetName(target) << " " << KindName(p.kind) << " rows=" << p.rows
          << " cols=" << p.cols << " t0=" << t0 << " n=" << n << " t=" << t << " r=" << r << " got "
          << y[t * p.rows + r] << " want " << p.ref[(t0 + t) * p.rows + r];
    }
  }
}

std::vector<QGemmTarget> Targets() {
  QGemmTarget t[3];
  const int n = AvailableQGemmTargets(t);
  return std::vector<QGemmTarget>(t, t + n);
}

TEST(QGemmTest, ReportsTargets) {
  for (QGemmTarget t : Targets()) std::printf("qgemm target available: %s\n", QGemmTargetName(t));
  std::printf("active: %s\n", QGemmTargetName(ActiveQGemmTarget()));
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512vnni")) {
    EXPECT_EQ(ActiveQGemmTarget(), QGemmTarget::kAvx512Vnni);
  }
#elif defined(__aarch64__)
  // qemu's default CPU "max" has dotprod, so deploy/test-arm-kernels.sh runs
  // every test below on kNeonDot too; QEMU_CPU=cortex-a53 has none.
  if (GetQGemmKernels(QGemmTarget::kNeonDot) != nullptr && CpuSupports(QGemmTarget::kNeonDot)) {
    EXPECT_EQ(ActiveQGemmTarget(), QGemmTarget::kNeonDot);
    EXPECT_EQ(Targets().front(), QGemmTarget::kNeonDot);
  } else {
    EXPECT_EQ(ActiveQGemmTarget(), QGemmTarget::kNone);
    EXPECT_EQ(Targets().size(), 1u);
  }
#endif
}

// Batch sizes 1..67 from several start tokens (so each token lands in every
// tile slot), with 1, 2 and 3 threads, on every kernel target.
TEST(QGemmTest, EveryBatchSize1To67IsBitIdenticalToReference) {
  std::mt19937 rng(1);
  ThreadPool pool2(2), pool3(3);
  ThreadPool* pools[] = {nullptr, &pool2, &pool3};
  for (QGemmKind kind : kKinds) {
    // Row counts cover every row tail of the 4- and 2-row tiles and several
    // cache blocks (kRowBlock = 32); cols cover 1 block and a long row.
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{40, 96}, {7, 32}, {70, 1024}}) {
      const Problem p = MakeProblem(kind, rows, cols, 67 + 7, rng);
      for (QGemmTarget target : Targets()) {
        for (int pi = 0; pi < 3; ++pi) {
          for (int64_t n = 1; n <= 67; ++n) {
            const int64_t t0 = (n * 5 + pi) % 8;
            ExpectExact(p, target, t0, n, pools[pi], "batch");
            if (HasFatalFailure()) return;
          }
        }
      }
    }
  }
}

// A 67-token prompt split into random chunks gives the same bits as the
// reference (hence as one whole batch).
TEST(QGemmTest, RandomChunkingsAreBitIdentical) {
  std::mt19937 rng(2);
  ThreadPool pool2(2), pool3(3);
  ThreadPool* pools[] = {nullptr, &pool2, &pool3};
  for (QGemmKind kind : kKinds) {
    const Problem p = MakeProblem(kind, kind == QGemmKind::kQ4_0 ? 45 : 48, 256, 67, rng);
    for (QGemmTarget target : Targets()) {
      for (int trial = 0; trial < 12; ++trial) {
        std::uniform_int_distribution<int64_t> len(1, trial < 6 ? 9 : 40);
        ThreadPool* pool = pools[trial % 3];
        for (int64_t t0 = 0; t0 < p.n_tokens;) {
          const int64_t n = std::min(len(rng), p.n_tokens - t0);
          ExpectExact(p, target, t0, n, pool, "chunk");
          if (HasFatalFailure()) return;
          t0 += n;
        }
      }
    }
  }
}

// MatMul dispatches to the quantized GEMM on every Highway target we compile
// (forced with SetSupportedTargetsForTest), and stays bit-identical there.
TEST(QGemmTest, MatMulOnEveryHighwayTargetIsBitIdentical) {
  std::mt19937 rng(3);
  ThreadPool pool2(2);
  for (QGemmKind kind : kKinds) {
    const Problem p = MakeProblem(kind, kind == QGemmKind::kQ4_0 ? 19 : 24, 160, 67, rng);
    for (int64_t hwy_target : hwy::SupportedAndGeneratedTargets()) {
      hwy::SetSupportedTargetsForTest(hwy_target);
      if (hwy_target == HWY_AVX2 && CpuSupports(QGemmTarget::kAvx2)) {
        EXPECT_EQ(ActiveQGemmTarget(), QGemmTarget::kAvx2);
      }
      if (hwy_target == HWY_NEON && GetQGemmKernels(QGemmTarget::kNeonDot) != nullptr &&
          CpuSupports(QGemmTarget::kNeonDot)) {
        EXPECT_EQ(ActiveQGemmTarget(), QGemmTarget::kNeonDot);
      }
      if (hwy_target == HWY_SCALAR || hwy_target == HWY_EMU128) {
        EXPECT_EQ(ActiveQGemmTarget(), QGemmTarget::kNone);
      }
      for (int64_t n : {1, 2, 3, 8, 9, 17, 67}) {
        ExpectExact(p, QGemmTarget::kNone, 0, n, &pool2, hwy::TargetName(hwy_target));
        if (HasFatalFailure()) break;
      }
      hwy::SetSupportedTargetsForTest(0);
      if (HasFatalFailure()) return;
    }
  }
}

// Extreme operands: weights of -128 and 127 (possible in a Q8_0 file, if not
// from ggml's quantizer), activations at +-127 and all-equal rows, where the
// integer paths would overflow or saturate if they were not exact.
TEST(QGemmTest, ExtremeOperandsAreExact) {
  const int64_t rows = 6, cols = 64, n_tokens = 5;
  Problem p{QGemmKind::kQ8_0, TensorType::kQ8_0, rows, cols, n_tokens, {}, {}, {}};
  p.w.resize(p.row_bytes() * rows);
  for (int64_t r = 0; r < rows; ++r) {
    auto* blocks = reinterpret_cast<BlockQ8_0*>(p.w.data() + r * p.row_bytes());
    for (int b = 0; b < 2; ++b) {
      blocks[b].d = Fp32ToFp16(0.5f + r);
      for (int k = 0; k < 32; ++k) {
        blocks[b].qs[k] =
            static_cast<int8_t>(r % 3 == 0 ? -128 : (r % 3 == 1 ? 127 : (k % 2 ? -128 : 127)));
      }
    }
  }
  p.x.resize(n_tokens * cols);
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t c = 0; c < cols; ++c) {
      p.x[t * cols + c] = t == 0 ? -1.0f : (t == 1 ? 1.0f : ((c + t) % 2 ? 3.0f : -3.0f));
    }
  }
  p.ref.resize(n_tokens * rows);
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      p.ref[t * rows + r] =
          DotRowReference(p.type, p.w.data() + r * p.row_bytes(), p.x.data() + t * cols, cols);
    }
  }
  for (QGemmTarget target : Targets()) {
    ExpectExact(p, target, 0, n_tokens, nullptr, "extreme");
  }
}

}  // namespace
}  // namespace ringlm
