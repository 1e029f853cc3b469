// A small command-line parser for subcommands: `--name value`,
// `--name=value`, boolean `--flag`, positional arguments and `--help`.
#ifndef RINGLM_BASE_ARG_PARSER_H_
#define RINGLM_BASE_ARG_PARSER_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ringlm {

// Declare options, then Parse once. Typed getters convert on demand and
// report which option had a bad value. Not thread-safe.
class ArgParser {
 public:
  ArgParser(std::string usage, std::string description);

  // An option that takes a value; `default_value` empty means unset.
  void AddOption(const std::string& name, const std::string& value_name, const std::string& help,
                 const std::string& default_value = "");
  // An option that may be given more than once; GetAll returns every value.
  void AddRepeatedOption(const std::string& name, const std::string& value_name,
                         const std::string& help);
  // A boolean switch.
  void AddFlag(const std::string& name, const std::string& help);
  // A short form such as "-n" for an option or flag declared above.
  void AddAlias(const std::string& short_form, const std::string& name);
  // A named positional argument (required, in order).
  void AddPositional(const std::string& name, const std::string& help);

  // InvalidArgument for an unknown option, a missing value, or a missing
  // positional. `help_requested()` is true after `--help`/`-h`.
  absl::Status Parse(const std::vector<std::string>& args);
  bool help_requested() const { return help_requested_; }
  std::string HelpText() const;

  bool Has(const std::string& name) const;  // given on the command line or defaulted
  std::string GetString(const std::string& name) const;
  bool GetFlag(const std::string& name) const;
  absl::StatusOr<int64_t> GetInt(const std::string& name, int64_t min, int64_t max) const;
  absl::StatusOr<double> GetDouble(const std::string& name) const;
  // Every value of a repeated option, in command-line order.
  std::vector<std::string> GetAll(const std::string& name) const;
  const std::string& Positional(size_t i) const { return positional_values_[i]; }

 private:
  struct Option {
    std::string value_name;  // empty for flags
    std::string help;
    std::string default_value;
    bool repeated = false;
  };
  std::string usage_;
  std::string description_;
  std::vector<std::string> order_;
  std::map<std::string, Option> options_;
  std::map<std::string, std::string> aliases_;                    // "-n" -> "n-predict"
  std::vector<std::pair<std::string, std::string>> positionals_;  // name, help
  std::map<std::string, std::string> values_;
  std::map<std::string, std::vector<std::string>> repeated_values_;
  std::vector<std::string> positional_values_;
  bool help_requested_ = false;
};

}  // namespace ringlm

#endif  // RINGLM_BASE_ARG_PARSER_H_
