// Speculative decoding's two small decisions, kept apart from the ring that
// carries them: what to guess (n-gram lookup over the session's own tokens)
// and how many guesses a request's next step may carry (from how its
// guesses fared). Pure logic: no model, no clock.
#ifndef RINGLM_INFERENCE_SAMPLING_SPECULATION_H_
#define RINGLM_INFERENCE_SAMPLING_SPECULATION_H_

#include <cstdint>
#include <span>
#include <vector>

namespace ringlm {

// Drafts in one step at most: the bound a step from the network is checked
// against, and the largest --max-drafts.
inline constexpr uint32_t kMaxDrafts = 16;
// Steps of one request in flight at once at most (the largest
// --steps-in-flight).
inline constexpr uint32_t kMaxStepsInFlight = 4;
// Positions a step may tell a stage to drop at most: every step in flight,
// each the token and its drafts.
inline constexpr uint32_t kMaxDiscard = (kMaxDrafts + 1) * kMaxStepsInFlight;

// Guesses up to `max_drafts` tokens to follow `history` ("prompt lookup"):
// finds the latest earlier place where the last 3 tokens (failing that, the
// last 2, then the last one) occurred, and returns what followed them there.
// Empty when the last token never occurred before. A one-token key guesses
// worse, but a rejected guess costs only a position, and DraftBudget stops
// drafting where positions cost more than the trips guesses save. Costs one
// backward scan of `history` per key length, so O(history) per step: 32K
// positions scan in tens of microseconds.
std::vector<int32_t> DraftByNgram(std::span<const int32_t> history, uint32_t max_drafts);

// How many drafts one request's next step may carry, from what its steps
// measured: how long a trip around the ring takes without drafts (t0), what
// each draft position adds to a trip (m), and how likely each next draft is
// to match once the ones before it did (q, from the drafts accepted and the
// rejections, counted with a decay so it follows the text). It picks the k
// that maximises the expected tokens per second,
//
//   (1 + q + q^2 + ... + q^k) / (t0 + m k),   k = 0 .. max_drafts,
//
// so drafting stops where checking drafts costs more than the trips they
// save (a compute-bound ring, a text that does not repeat itself), and
// grows where trips cost more than positions (a ring with slow links).
// While it does not draft it still tries one draft every 32 steps, so it
// notices a text that starts repeating. Until it has measured them it takes
// q = 1/2 and m = 0, so it drafts all it may; once a drafting step's trip
// is measured without a plain one to compare it with, the next step is
// plain (t0), so a text in which lookup always finds a guess still gets
// its drafts' cost measured.
//
// Speculation is exact whatever this decides: it only trades the extra
// positions each step computes against the trips it saves. Not
// thread-safe; one per request.
class DraftBudget {
 public:
  explicit DraftBudget(uint32_t max_drafts);

  // The drafts the next step may carry; 0 = a plain step. Call once a step.
  uint32_t Next();
  // What the step that carried `drafted` drafts (0 for a plain step) got:
  // `accepted` of them matched, and its trip took `trip_seconds` (from the
  // sampling of the step before to its own; <= 0 when not known).
  void Record(uint32_t drafted, uint32_t accepted, double trip_seconds);
  // How likely the next `guesses` guesses all match, from the same
  // measurement as Next(): whether a step sent ahead, betting that the
  // steps before it are accepted whole, is worth sending. 0 until a step
  // has checked drafts: the prior alone never sends a step ahead.
  double MatchOdds(uint32_t guesses) const;

 private:
  static constexpr double kDecay = 0.95;     // weight of the past, per drafting step
  static constexpr double kSmoothing = 0.2;  // of the time averages
  static constexpr uint32_t kProbeEvery = 32;
  double MatchRate() const;  // q

  const uint32_t max_;
  double plain_trip_ = 0;      // t0, seconds; 0 = not measured yet
  double draft_seconds_ = 0;   // m, seconds per draft position
  double matched_ = 0;         // drafts accepted, decayed
  double rejected_ = 0;        // drafting steps that rejected a draft, decayed
  uint32_t since_draft_ = 0;   // steps since the last that carried drafts
  bool plain_wanted_ = false;  // the next step is plain, to measure t0
};

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_SAMPLING_SPECULATION_H_
