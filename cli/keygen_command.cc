// `ringlm keygen` writes a new cluster key, the secret every node of one
// cluster shares (docs/security.md); `ringlm join-command` prints the one
// line that installs it on another machine and starts a node there.
#include <ostream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "cli/cli_common.h"
#include "cli/commands.h"
#include "security/cluster_key.h"

namespace ringlm {

int RunKeygen(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  ArgParser p("ringlm keygen --out FILE [--force]",
              "Writes a new random cluster key to FILE with mode 0600. Copy the file to every\n"
              "node of the cluster (scp, a config manager) and start each daemon with\n"
              "`ringlmd --cluster-key FILE`; only holders of the key can join the cluster,\n"
              "call its nodes or read its traffic.");
  p.AddOption("out", "FILE", "where to write the key");
  p.AddFlag("force", "replace an existing file");
  if (int rc = ParseOrExit(p, args, out, err); rc >= 0) return rc;
  if (!p.Has("out")) return Fail(absl::InvalidArgumentError("--out FILE is required"), err);
  const std::string path = p.GetString("out");
  absl::StatusOr<ClusterKey> key = ClusterKey::Generate();
  if (!key.ok()) return Fail(key.status(), err);
  if (absl::Status s = key->WriteFile(path, p.GetFlag("force")); !s.ok()) return Fail(s, err);
  out << absl::StrFormat("wrote a new cluster key to %s (cluster %s)\n", path.c_str(),
                         key->ClusterId().c_str());
  out << absl::StrFormat("copy it to every node, mode 0600, then: ringlmd --cluster-key %s ...\n",
                         path.c_str());
  return 0;
}

namespace {

// Single-quoted for a POSIX shell.
std::string ShellQuote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace

int RunJoinCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  ArgParser p("ringlm join-command [--cluster-key FILE] [--model PATH] [--key-path PATH]",
              "Prints a shell command that installs this cluster's key on another machine\n"
              "(mode 0600) and starts ringlmd there with it. The line holds the key itself:\n"
              "pass it on privately (ssh, not chat), as you would a password.");
  p.AddOption("cluster-key", "FILE", "the cluster key (default: $RINGLM_CLUSTER_KEY_FILE)");
  p.AddOption("model", "PATH", "the model path on the joining machine", "/models/model.gguf");
  p.AddOption("key-path", "PATH", "where the joining machine keeps the key",
              "/etc/ringlm/cluster.key");
  if (int rc = ParseOrExit(p, args, out, err); rc >= 0) return rc;
  const std::string file = ClusterKeyFile(p.GetString("cluster-key"));
  if (file.empty()) {
    return Fail(absl::InvalidArgumentError("--cluster-key FILE (or RINGLM_CLUSTER_KEY_FILE) is "
                                           "required"),
                err);
  }
  absl::StatusOr<ClusterKey> key = ClusterKey::LoadFile(file);
  if (!key.ok()) return Fail(key.status(), err);
  const std::string path = ShellQuote(p.GetString("key-path"));
  out << absl::StrFormat(
      "(umask 077 && mkdir -p \"$(dirname %s)\" && printf '%%s\\n' %s > %s) && "
      "ringlmd --model %s --cluster-key %s\n",
      path.c_str(),
      ShellQuote(std::string(absl::StripTrailingAsciiWhitespace(key->Serialize()))).c_str(),
      path.c_str(), ShellQuote(p.GetString("model")).c_str(), path.c_str());
  return 0;
}

}  // namespace ringlm
