#include "base/arg_parser.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ringlm {

ArgParser::ArgParser(std::string usage, std::string description)
    : usage_(std::move(usage)), description_(std::move(description)) {}

void ArgParser::AddOption(const std::string& name, const std::string& value_name,
                          const std::string& help, const std::string& default_value) {
  order_.push_back(name);
  options_[name] = Option{value_name.empty() ? "VALUE" : value_name, help, default_value};
}

void ArgParser::AddRepeatedOption(const std::string& name, const std::string& value_name,
                                  const std::string& help) {
  order_.push_back(name);
  options_[name] = Option{value_name.empty() ? "VALUE" : value_name, help, "", true};
}

void ArgParser::AddFlag(const std::string& name, const std::string& help) {
  order_.push_back(name);
  options_[name] = Option{"", help, ""};
}

void ArgParser::AddAlias(const std::string& short_form, const std::string& name) {
  aliases_[short_form] = name;
}

void ArgParser::AddPositional(const std::string& name, const std::string& help) {
  positionals_.emplace_back(name, help);
}

absl::Status ArgParser::Parse(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i];
    if (auto alias = aliases_.find(arg); alias != aliases_.end())
      arg = absl::StrCat("--", alias->second);
    if (arg == "--help" || arg == "-h") {
      help_requested_ = true;
      return absl::OkStatus();
    }
    if (arg.rfind("--", 0) != 0 || arg.size() == 2) {
      positional_values_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    std::optional<std::string> value;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    auto it = options_.find(name);
    if (it == options_.end()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown option --", name, " (see --help)"));
    }
    if (it->second.value_name.empty()) {
      if (value.has_value()) {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " takes no value"));
      }
      values_[name].assign(1, '1');  // not = "1": GCC 12 warns falsely (-Wrestrict)
      continue;
    }
    if (!value.has_value()) {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", name, " needs a value (", it->second.value_name, ")"));
      }
      value = args[++i];
    }
    values_[name] = *value;
    if (it->second.repeated) repeated_values_[name].push_back(*value);
  }
  if (positional_values_.size() < positionals_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "missing argument ", positionals_[positional_values_.size()].first, " (see --help)"));
  }
  if (positional_values_.size() > positionals_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unexpected argument '", positional_values_[positionals_.size()], "' (see --help)"));
  }
  return absl::OkStatus();
}

std::string ArgParser::HelpText() const {
  std::string out = absl::StrCat("usage: ", usage_, "\n\n", description_, "\n");
  if (!positionals_.empty()) {
    out += "\narguments:\n";
    for (const auto& [name, help] : positionals_) {
      absl::StrAppendFormat(&out, "  %-24s %s\n", name, help);
    }
  }
  if (!order_.empty()) out += "\noptions:\n";
  for (const std::string& name : order_) {
    const Option& o = options_.at(name);
    std::string left = absl::StrCat("--", name);
    for (const auto& [short_form, long_name] : aliases_) {
      if (long_name == name) left = absl::StrCat(short_form, ", ", left);
    }
    if (!o.value_name.empty()) absl::StrAppend(&left, " ", o.value_name);
    std::string help = o.help;
    if (!o.default_value.empty()) absl::StrAppend(&help, " (default: ", o.default_value, ")");
    if (o.repeated) absl::StrAppend(&help, " (repeatable)");
    absl::StrAppendFormat(&out, "  %-24s %s\n", left, help);
  }
  absl::StrAppendFormat(&out, "  %-24s %s\n", "-h, --help", "show this help");
  return out;
}

bool ArgParser::Has(const std::string& name) const {
  if (values_.count(name) > 0) return true;
  auto it = options_.find(name);
  return it != options_.end() && !it->second.default_value.empty();
}

std::string ArgParser::GetString(const std::string& name) const {
  if (auto it = values_.find(name); it != values_.end()) return it->second;
  auto it = options_.find(name);
  return it == options_.end() ? "" : it->second.default_value;
}

bool ArgParser::GetFlag(const std::string& name) const { return values_.count(name) > 0; }

std::vector<std::string> ArgParser::GetAll(const std::string& name) const {
  auto it = repeated_values_.find(name);
  return it == repeated_values_.end() ? std::vector<std::string>{} : it->second;
}

absl::StatusOr<int64_t> ArgParser::GetInt(const std::string& name, int64_t min, int64_t max) const {
  const std::string s = GetString(name);
  int64_t v = 0;
  if (!absl::SimpleAtoi(s, &v)) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " wants an integer, got '", s, "'"));
  }
  if (v < min || v > max) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " = ", v, " is outside [", min, ", ", max, "]"));
  }
  return v;
}

absl::StatusOr<double> ArgParser::GetDouble(const std::string& name) const {
  const std::string s = GetString(name);
  double v = 0;
  if (!absl::SimpleAtod(s, &v)) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " wants a number, got '", s, "'"));
  }
  return v;
}

}  // namespace ringlm
