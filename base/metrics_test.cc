#include "base/metrics.h"

#include <atomic>
#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "base/prometheus_text.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringlm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Optional;

std::vector<PrometheusSample> MustParse(const std::string& text) {
  absl::StatusOr<std::vector<PrometheusSample>> samples = ParsePrometheusText(text);
  EXPECT_TRUE(samples.ok()) << samples.status() << "\n" << text;
  return samples.ok() ? *samples : std::vector<PrometheusSample>{};
}

int CountOccurrences(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + 1)) {
    ++n;
  }
  return n;
}

TEST(MetricsTest, ACallbackCounterIsReadAtEachRenderAndTypedCounter) {
  MetricsRegistry registry;
  double evicted = 3;
  ASSERT_TRUE(registry
                  .AddCallbackCounter("ringlm_evicted_total", "Evicted.", {},
                                      [&evicted] { return evicted; })
                  .ok());
  EXPECT_EQ(registry.RenderPrometheusText(),
            "# HELP ringlm_evicted_total Evicted.\n"
            "# TYPE ringlm_evicted_total counter\n"
            "ringlm_evicted_total 3\n");
  evicted = 5;
  EXPECT_NE(registry.RenderPrometheusText().find("ringlm_evicted_total 5\n"), std::string::npos);
  EXPECT_EQ(registry.AddCounter("ringlm_evicted_total", "").status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(registry.AddCallbackCounter("ringlm_evicted_total", "", {}, [] { return 1.0; }).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(registry.AddCallbackGauge("ringlm_evicted_total", "", {}, [] { return 1.0; }).code(),
            absl::StatusCode::kAlreadyExists);
}

TEST(MetricsTest, RendersExactText) {
  MetricsRegistry registry;
  Counter* requests = *registry.AddCounter("ringlm_requests_total", "Chat requests.");
  Gauge* stage0 = *registry.AddGauge("ringlm_stage_ms", "Forward time.", {{"stage", "0"}});
  Gauge* stage1 = *registry.AddGauge("ringlm_stage_ms", "Forward time.", {{"stage", "1"}});
  Histogram* ttft = *registry.AddHistogram("ringlm_ttft_seconds", "Time to first token.", {0.1, 1},
                                           {{"model", "tiny"}});
  ASSERT_TRUE(registry.AddCallbackGauge("ringlm_peers", "Peers.", {}, [] { return 2.0; }).ok());
  requests->Increment();
  requests->Increment(2);
  stage0->Set(1.5);
  stage1->Set(-3);
  ttft->Observe(0.05);
  ttft->Observe(0.5);
  ttft->Observe(7);

  EXPECT_EQ(registry.RenderPrometheusText(),
            "# HELP ringlm_requests_total Chat requests.\n"
            "# TYPE ringlm_requests_total counter\n"
            "ringlm_requests_total 3\n"
            "# HELP ringlm_stage_ms Forward time.\n"
            "# TYPE ringlm_stage_ms gauge\n"
            "ringlm_stage_ms{stage=\"0\"} 1.5\n"
            "ringlm_stage_ms{stage=\"1\"} -3\n"
            "# HELP ringlm_ttft_seconds Time to first token.\n"
            "# TYPE ringlm_ttft_seconds histogram\n"
            "ringlm_ttft_seconds_bucket{model=\"tiny\",le=\"0.1\"} 1\n"
            "ringlm_ttft_seconds_bucket{model=\"tiny\",le=\"1\"} 2\n"
            "ringlm_ttft_seconds_bucket{model=\"tiny\",le=\"+Inf\"} 3\n"
            "ringlm_ttft_seconds_sum{model=\"tiny\"} 7.55\n"
            "ringlm_ttft_seconds_count{model=\"tiny\"} 3\n"
            "# HELP ringlm_peers Peers.\n"
            "# TYPE ringlm_peers gauge\n"
            "ringlm_peers 2\n");
}

// A daemon serving two models renders their registries as one exposition,
// each series labelled with its model, a family once.
TEST(MetricsTest, RendersSeveralRegistriesWithTheirLabels) {
  MetricsRegistry daemon, small, large;
  *daemon.AddCounter("ringlm_api_requests_total", "API requests.");
  (*small.AddCounter("ringlm_requests_total", "Requests.", {{"finish", "stop"}}))->Increment(2);
  (*large.AddCounter("ringlm_requests_total", "Requests.", {{"finish", "stop"}}))->Increment(5);
  (*large.AddHistogram("ringlm_forward_seconds", "Forward.", {1}))->Observe(0.5);
  // Another kind under a taken name is left out, not mixed in.
  *small.AddGauge("ringlm_forward_seconds", "Forward.");

  const std::string text = MetricsRegistry::RenderPrometheusText(
      {{&daemon, {}}, {&small, {{"model", "small"}}}, {&large, {{"model", "large"}}}});
  EXPECT_EQ(text,
            "# HELP ringlm_api_requests_total API requests.\n"
            "# TYPE ringlm_api_requests_total counter\n"
            "ringlm_api_requests_total 0\n"
            "# HELP ringlm_requests_total Requests.\n"
            "# TYPE ringlm_requests_total counter\n"
            "ringlm_requests_total{finish=\"stop\",model=\"small\"} 2\n"
            "ringlm_requests_total{finish=\"stop\",model=\"large\"} 5\n"
            "# HELP ringlm_forward_seconds Forward.\n"
            "# TYPE ringlm_forward_seconds gauge\n"
            "ringlm_forward_seconds{model=\"small\"} 0\n");
  EXPECT_TRUE(ParsePrometheusText(text).ok());
}

TEST(MetricsTest, RenderParseRoundTrip) {
  MetricsRegistry registry;
  Counter* tokens = *registry.AddCounter("tokens_total", "Tokens.", {{"dir", "out"}});
  *registry.AddCounter("tokens_total", "Tokens.", {{"dir", "in"}});
  Histogram* h =
      *registry.AddHistogram("tpot_seconds", "Per token.", ExponentialBuckets(0.001, 2, 12));
  ASSERT_TRUE(registry
                  .AddCallbackGauge("cache_bytes", "Bytes.", {{"kind", "kv"}},
                                    [] { return 1.0 * (1 << 30); })
                  .ok());
  tokens->Increment(41);
  for (int i = 0; i < 100; ++i) h->Observe(i * 0.0013);

  std::string text = registry.RenderPrometheusText();
  std::vector<PrometheusSample> samples = MustParse(text);
  EXPECT_THAT(FindSample(samples, "tokens_total", {{"dir", "out"}}), Optional(41.0));
  EXPECT_THAT(FindSample(samples, "tokens_total", {{"dir", "in"}}), Optional(0.0));
  EXPECT_THAT(FindSample(samples, "cache_bytes", {{"kind", "kv"}}), Optional(1073741824.0));
  EXPECT_THAT(FindSample(samples, "tpot_seconds_count"), Optional(100.0));
  EXPECT_THAT(FindSample(samples, "tpot_seconds_bucket", {{"le", "+Inf"}}), Optional(100.0));
  EXPECT_THAT(FindSample(samples, "tpot_seconds_bucket", {{"le", "0.001"}}), Optional(1.0));
  EXPECT_THAT(FindSample(samples, "tpot_seconds_bucket", {{"le", "0.002"}}), Optional(2.0));
  EXPECT_EQ(FindSample(samples, "tokens_total"), std::nullopt);  // label set must match
  // HELP and TYPE once per family, however many series.
  EXPECT_EQ(CountOccurrences(text, "# TYPE tokens_total "), 1);
  EXPECT_EQ(CountOccurrences(text, "# HELP tokens_total "), 1);
  EXPECT_EQ(std::string(kPrometheusContentType), "text/plain; version=0.0.4; charset=utf-8");
}

TEST(MetricsTest, CountersMove) {
  MetricsRegistry registry;
  Counter* c = *registry.AddCounter("requests_total", "Requests.");
  EXPECT_THAT(FindSample(MustParse(registry.RenderPrometheusText()), "requests_total"),
              Optional(0.0));
  c->Increment();
  c->Increment(0.5);
  c->Increment(-4);  // ignored: counters only go up
  c->Increment(std::nan(""));
  EXPECT_EQ(c->Value(), 1.5);
  EXPECT_THAT(FindSample(MustParse(registry.RenderPrometheusText()), "requests_total"),
              Optional(1.5));
  Gauge* g = *registry.AddGauge("in_flight", "In flight.");
  g->Add(3);
  g->Add(-1);
  EXPECT_THAT(FindSample(MustParse(registry.RenderPrometheusText()), "in_flight"), Optional(2.0));
}

TEST(MetricsTest, HistogramBucketEdgesAreInclusive) {
  MetricsRegistry registry;
  Histogram* h = *registry.AddHistogram("lat", "Latency.", {1, 2, 5});
  for (double v : {-3.0, 0.5, 1.0, std::nextafter(1.0, 2.0), 2.0, 5.0, 5.5,
                   std::numeric_limits<double>::infinity()}) {
    h->Observe(v);
  }
  h->Observe(std::nan(""));  // ignored
  EXPECT_THAT(h->BucketCounts(), ElementsAre(3, 2, 1, 2));
  EXPECT_EQ(h->Count(), 8u);

  h = *registry.AddHistogram("lat2", "Latency.", {1, 2, 5});
  for (double v : {-3.0, 0.5, 1.0, std::nextafter(1.0, 2.0), 2.0, 5.0, 5.5}) h->Observe(v);
  std::vector<PrometheusSample> samples = MustParse(registry.RenderPrometheusText());
  EXPECT_THAT(FindSample(samples, "lat2_bucket", {{"le", "1"}}), Optional(3.0));
  EXPECT_THAT(FindSample(samples, "lat2_bucket", {{"le", "2"}}), Optional(5.0));
  EXPECT_THAT(FindSample(samples, "lat2_bucket", {{"le", "5"}}), Optional(6.0));
  EXPECT_THAT(FindSample(samples, "lat2_bucket", {{"le", "+Inf"}}), Optional(7.0));
  EXPECT_THAT(FindSample(samples, "lat2_count"), Optional(7.0));
  double sum = *FindSample(samples, "lat2_sum");
  EXPECT_NEAR(sum, -3 + 0.5 + 1 + 1 + 2 + 5 + 5.5, 1e-9);
  EXPECT_THAT(FindSample(samples, "lat_sum"), Optional(std::numeric_limits<double>::infinity()));
}

TEST(MetricsTest, HistogramWithoutBoundsHasOnlyInf) {
  MetricsRegistry registry;
  Histogram* h = *registry.AddHistogram("x", "X.", {std::numeric_limits<double>::infinity()});
  EXPECT_TRUE(h->bounds().empty());
  h->Observe(1);
  std::vector<PrometheusSample> samples = MustParse(registry.RenderPrometheusText());
  EXPECT_THAT(FindSample(samples, "x_bucket", {{"le", "+Inf"}}), Optional(1.0));
}

TEST(MetricsTest, EscapesLabelValuesAndHelp) {
  MetricsRegistry registry;
  const std::string nasty = "a\\b\"c\nd{},=";
  *registry.AddCounter("c", "Help with \\ and\nnewline \"quoted\".", {{"path", nasty}});
  std::string text = registry.RenderPrometheusText();
  EXPECT_THAT(text, HasSubstr("# HELP c Help with \\\\ and\\nnewline \"quoted\".\n"));
  EXPECT_THAT(text, HasSubstr("c{path=\"a\\\\b\\\"c\\nd{},=\"} 0\n"));
  std::vector<PrometheusSample> samples = MustParse(text);
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_THAT(samples[0].labels, ElementsAre(std::pair<std::string, std::string>("path", nasty)));
}

TEST(MetricsTest, FormatsNumbersPrometheusCanRead) {
  MetricsRegistry registry;
  struct Case {
    const char* name;
    double value;
    const char* text;
  };
  const Case cases[] = {
      {"int", 123456789, "int 123456789\n"},
      {"big_int", 1e14, "big_int 100000000000000\n"},
      {"huge", 1e20, "huge 1e+20\n"},
      {"frac", 0.1, "frac 0.1\n"},
      {"tiny", 1.5e-7, "tiny 1.5e-07\n"},
      {"neg_zero", -0.0, "neg_zero 0\n"},
      {"inf", std::numeric_limits<double>::infinity(), "inf +Inf\n"},
      {"ninf", -std::numeric_limits<double>::infinity(), "ninf -Inf\n"},
      {"nan", std::nan(""), "nan NaN\n"},
      {"third", 1.0 / 3, "third 0.3333333333333333\n"},
  };
  for (const Case& c : cases) (*registry.AddGauge(c.name, "N."))->Set(c.value);
  std::string text = registry.RenderPrometheusText();
  std::vector<PrometheusSample> samples = MustParse(text);
  for (const Case& c : cases) {
    EXPECT_THAT(text, HasSubstr(c.text));
    std::optional<double> v = FindSample(samples, c.name);
    ASSERT_TRUE(v.has_value()) << c.name;
    if (std::isnan(c.value)) {
      EXPECT_TRUE(std::isnan(*v));
    } else {
      EXPECT_EQ(*v, c.value) << c.name;  // exact round trip
    }
  }
}

TEST(MetricsTest, ReRegistrationReturnsTheSameMetric) {
  MetricsRegistry registry;
  Counter* a = *registry.AddCounter("c", "C.", {{"x", "1"}, {"y", "2"}});
  Counter* b = *registry.AddCounter("c", "Other help is ignored.", {{"y", "2"}, {"x", "1"}});
  Counter* other = *registry.AddCounter("c", "C.", {{"x", "2"}, {"y", "2"}});
  EXPECT_EQ(a, b);
  EXPECT_NE(a, other);
  Histogram* h1 = *registry.AddHistogram("h", "H.", {1, 2});
  Histogram* h2 =
      *registry.AddHistogram("h", "H.", {1, 2, std::numeric_limits<double>::infinity()});
  EXPECT_EQ(h1, h2);
  Gauge* g1 = *registry.AddGauge("g", "G.");
  EXPECT_EQ(g1, *registry.AddGauge("g", "G."));
  // Labels render sorted by key.
  EXPECT_THAT(registry.RenderPrometheusText(), HasSubstr("c{x=\"1\",y=\"2\"} 0\n"));
}

TEST(MetricsTest, RejectsBadRegistrations) {
  MetricsRegistry registry;
  ASSERT_TRUE(registry.AddCounter("c", "C.").ok());
  ASSERT_TRUE(registry.AddHistogram("h", "H.", {1}).ok());
  ASSERT_TRUE(registry.AddCallbackGauge("cb", "CB.", {}, [] { return 1.0; }).ok());
  auto code = [](const auto& status_or) {
    if constexpr (std::is_same_v<std::decay_t<decltype(status_or)>, absl::Status>) {
      return status_or.code();
    } else {
      return status_or.status().code();
    }
  };
  using absl::StatusCode;
  EXPECT_EQ(code(registry.AddCounter("", "")), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(registry.AddCounter("9lives", "")), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(registry.AddCounter("with-dash", "")), StatusCode::kInvalidArgument);
  EXPECT_TRUE(registry.AddCounter("ns:sub_name9", "").ok());
  EXPECT_EQ(code(registry.AddCounter("d", "", {{"a:b", "v"}})), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(registry.AddCounter("d", "", {{"__x", "v"}})), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(registry.AddCounter("d", "", {{"a", "1"}, {"a", "2"}})),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(registry.AddGauge("c", "")), StatusCode::kAlreadyExists);
  EXPECT_EQ(code(registry.AddHistogram("c", "", {1})), StatusCode::kAlreadyExists);
  EXPECT_EQ(code(registry.AddHistogram("h", "", {2})), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(registry.AddHistogram("h2", "", {2, 1})), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(registry.AddHistogram("h2", "", {1, 1})), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(registry.AddHistogram("h2", "", {std::nan("")})), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(registry.AddHistogram("h2", "", {1}, {{"le", "1"}})),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(registry.AddCounter("h_count", "")), StatusCode::kAlreadyExists);
  EXPECT_EQ(code(registry.AddGauge("h_bucket", "")), StatusCode::kAlreadyExists);
  EXPECT_EQ(code(registry.AddHistogram("c_", "", {1})), StatusCode::kOk);
  ASSERT_TRUE(registry.AddGauge("x_sum", "").ok());
  EXPECT_EQ(code(registry.AddHistogram("x", "", {1})), StatusCode::kAlreadyExists);
  EXPECT_EQ(code(registry.AddCallbackGauge("cb", "", {}, [] { return 2.0; })),
            StatusCode::kAlreadyExists);
  EXPECT_EQ(code(registry.AddGauge("cb", "")), StatusCode::kAlreadyExists);
  EXPECT_EQ(code(registry.AddCallbackGauge("c", "", {}, [] { return 2.0; })),
            StatusCode::kAlreadyExists);
  EXPECT_EQ(code(registry.AddCallbackGauge("cb2", "", {}, nullptr)), StatusCode::kInvalidArgument);
  // Nothing above left a half-made family behind.
  MustParse(registry.RenderPrometheusText());
  EXPECT_THAT(registry.RenderPrometheusText(), ::testing::Not(HasSubstr("h2")));
}

TEST(MetricsTest, CallbackGaugesAreReadAtRender) {
  MetricsRegistry registry;
  std::atomic<int> peers{1};
  ASSERT_TRUE(registry.AddCallbackGauge("peers", "Peers.", {}, [&] { return peers.load(); }).ok());
  // A callback runs without the registry lock, so it may use the registry.
  ASSERT_TRUE(
      registry
          .AddCallbackGauge("layers_held", "Layers.", {{"node", "a"}},
                            [&] {
                              (*registry.AddCounter("renders_total", "Renders."))->Increment();
                              return 12.0;
                            })
          .ok());
  ASSERT_TRUE(registry.AddGauge("peers", "Peers.", {{"kind", "plain"}}).ok());
  std::vector<PrometheusSample> samples = MustParse(registry.RenderPrometheusText());
  EXPECT_THAT(FindSample(samples, "peers"), Optional(1.0));
  EXPECT_THAT(FindSample(samples, "layers_held", {{"node", "a"}}), Optional(12.0));
  peers = 3;
  samples = MustParse(registry.RenderPrometheusText());
  EXPECT_THAT(FindSample(samples, "peers"), Optional(3.0));
  // Registered during the first render (after its snapshot); the second render
  // ran the callback again before formatting renders_total.
  EXPECT_THAT(FindSample(samples, "renders_total"), Optional(2.0));
}

TEST(MetricsTest, ConcurrentUpdatesAndRenders) {
  MetricsRegistry registry;
  constexpr int kThreads = 8;
  constexpr int kIterations = 20000;
  std::atomic<bool> done{false};
  std::atomic<int> renders{0};
  std::thread renderer([&] {
    while (!done.load()) {
      absl::StatusOr<std::vector<PrometheusSample>> parsed =
          ParsePrometheusText(registry.RenderPrometheusText());
      ASSERT_TRUE(parsed.ok()) << parsed.status();
      ++renders;
    }
  });
  std::vector<std::thread> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&, t] {
      // Registration races too: every thread asks for the same shared metrics.
      Counter* shared = *registry.AddCounter("requests_total", "Requests.");
      Histogram* h = *registry.AddHistogram("lat", "Latency.", {1, 10, 100});
      Counter* own =
          *registry.AddCounter("per_thread_total", "Per thread.", {{"t", std::to_string(t)}});
      for (int i = 0; i < kIterations; ++i) {
        shared->Increment();
        own->Increment();
        h->Observe(i % 200);
      }
    });
  }
  for (std::thread& w : workers) w.join();
  done = true;
  renderer.join();
  EXPECT_GT(renders.load(), 0);

  std::vector<PrometheusSample> samples = MustParse(registry.RenderPrometheusText());
  EXPECT_THAT(FindSample(samples, "requests_total"), Optional(1.0 * kThreads * kIterations));
  EXPECT_THAT(FindSample(samples, "lat_count"), Optional(1.0 * kThreads * kIterations));
  EXPECT_THAT(FindSample(samples, "lat_bucket", {{"le", "1"}}),
              Optional(2.0 * kThreads * kIterations / 200));
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_THAT(FindSample(samples, "per_thread_total", {{"t", std::to_string(t)}}),
                Optional(1.0 * kIterations));
  }
}

}  // namespace
}  // namespace ringlm
