#include "daemon/origin/prefix_adoption.h"

#include <numeric>
#include <vector>

#include "daemon/origin/test_origin.h"
#include "gtest/gtest.h"
#include "inference/token_digest.h"

namespace ringlm {
namespace {

std::vector<int32_t> Prompt(size_t n) {
  std::vector<int32_t> p(n);
  std::iota(p.begin(), p.end(), 100);
  return p;
}

std::vector<uint32_t> Lengths(const v1::AdoptPrefixRequest& offer) {
  return {offer.lengths().begin(), offer.lengths().end()};
}

TEST(AdoptionOfferTest, OffersEveryBlockAndAllButTheLastToken) {
  const std::vector<int32_t> prompt = Prompt(50);
  const v1::AdoptPrefixRequest offer = AdoptionOffer("s-1", prompt);
  EXPECT_EQ(offer.session_id(), "s-1");
  EXPECT_EQ(offer.protocol_version(), v1::PROTOCOL_VERSION_CURRENT);
  EXPECT_EQ(Lengths(offer), (std::vector<uint32_t>{16, 32, 48, 49}));
  ASSERT_EQ(offer.digests_size(), 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(offer.digests(i),
              TokenDigest(std::span<const int32_t>(prompt.data(), offer.lengths(i))));
  }
  EXPECT_EQ(Lengths(AdoptionOffer("s", Prompt(17))), (std::vector<uint32_t>{16}));
  EXPECT_EQ(Lengths(AdoptionOffer("s", Prompt(2))), (std::vector<uint32_t>{1}));
  EXPECT_TRUE(Lengths(AdoptionOffer("s", Prompt(1))).empty());
}

TEST(AdoptionOfferTest, ALongPromptGetsAWiderStrideAndNoMoreThanTheLimit) {
  for (size_t n : {1000u, 1009u, 1010u, 4096u, 32768u, 131072u}) {
    const std::vector<uint32_t> lengths = Lengths(AdoptionOffer("s", Prompt(n)));
    ASSERT_LE(lengths.size(), static_cast<size_t>(kMaxAdoptClaims)) << n;
    EXPECT_EQ(lengths.back(), n - 1) << n;
    const uint32_t stride = lengths[0];
    EXPECT_EQ(stride % 16, 0u) << n;
    for (size_t i = 1; i + 1 < lengths.size(); ++i) EXPECT_EQ(lengths[i], (i + 1) * stride) << n;
    EXPECT_GT(lengths.back(), lengths[lengths.size() - 2]) << n;
  }
}

TEST(AdoptPrefixTest, EveryStageMustHoldWhatItClaimsAndLaterStagesAreOfferedLess) {
  RecordingTransport transport;
  const v1::Plan plan = PlanOf({"a", "b", "c"}, 1);
  const std::vector<int32_t> prompt = Prompt(50);
  transport.HoldPrefix("a", 49);
  transport.HoldPrefix("b", 40);  // the longest offered length it holds: 32
  transport.HoldPrefix("c", 49);
  EXPECT_EQ(AdoptPrefix(transport, plan, "s-1", prompt), 32u);
  const auto offers = transport.offers();
  ASSERT_EQ(offers.size(), 3u);
  EXPECT_EQ(Lengths(offers[0].second), (std::vector<uint32_t>{16, 32, 48, 49}));
  EXPECT_EQ(Lengths(offers[1].second), (std::vector<uint32_t>{16, 32, 48, 49}));
  EXPECT_EQ(offers[2].first, "c");
  EXPECT_EQ(Lengths(offers[2].second), (std::vector<uint32_t>{16, 32}));
  EXPECT_EQ(offers[2].second.digests_size(), 2);
}

TEST(AdoptPrefixTest, AStageThatHoldsNothingOrFailsEndsTheAskingWithNothing) {
  RecordingTransport transport;
  const v1::Plan plan = PlanOf({"a", "b", "c"}, 1);
  transport.HoldPrefix("a", 49);  // b holds none: c is never asked
  EXPECT_EQ(AdoptPrefix(transport, plan, "s-1", Prompt(50)), 0u);
  EXPECT_EQ(transport.offers().size(), 2u);

  RecordingTransport failing;
  for (const char* n : {"a", "b", "c"}) failing.HoldPrefix(n, 49);
  failing.FailCallsTo({"b"});
  EXPECT_EQ(AdoptPrefix(failing, plan, "s-1", Prompt(50)), 0u);

  // A one-token prompt has nothing to offer, and nobody is asked.
  RecordingTransport quiet;
  EXPECT_EQ(AdoptPrefix(quiet, plan, "s-1", Prompt(1)), 0u);
  EXPECT_TRUE(quiet.offers().empty());
}

// A stage that answers a length it was not offered broke the rules: its
// answer is not trusted.
class LyingTransport : public RecordingTransport {
 public:
  absl::StatusOr<uint32_t> AdoptPrefix(const std::string&, const v1::AdoptPrefixRequest&) override {
    return 20u;
  }
};

TEST(AdoptPrefixTest, ALengthThatWasNotOfferedCountsAsNothing) {
  LyingTransport transport;
  EXPECT_EQ(AdoptPrefix(transport, PlanOf({"a"}, 1), "s-1", Prompt(50)), 0u);
}

}  // namespace
}  // namespace ringlm
