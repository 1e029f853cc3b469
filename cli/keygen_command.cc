// `ringlm keygen`: writes a new cluster key, the secret every node of one
// cluster shares (docs/security.md).
#include <cstdio>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "security/cluster_key.h"

namespace ringlm {

int RunKeygen(const std::vector<std::string>& args) {
  ArgParser p("ringlm keygen --out FILE [--force]",
              "Writes a new random cluster key to FILE with mode 0600. Copy the file to every\n"
              "node of the cluster (scp, a config manager) and start each daemon with\n"
              "`ringlmd --cluster-key FILE`; only holders of the key can join the cluster,\n"
              "call its nodes or read its traffic.");
  p.AddOption("out", "FILE", "where to write the key");
  p.AddFlag("force", "replace an existing file");
  if (int rc = ParseOrExit(p, args); rc >= 0) return rc;
  if (!p.Has("out")) return Fail(absl::InvalidArgumentError("--out FILE is required"));
  const std::string out = p.GetString("out");
  absl::StatusOr<ClusterKey> key = ClusterKey::Generate();
  if (!key.ok()) return Fail(key.status());
  if (absl::Status s = key->WriteFile(out, p.GetFlag("force")); !s.ok()) return Fail(s);
  std::printf("wrote a new cluster key to %s (cluster %s)\n", out.c_str(),
              key->ClusterId().c_str());
  std::printf("copy it to every node, mode 0600, then: ringlmd --cluster-key %s ...\n",
              out.c_str());
  return 0;
}

}  // namespace ringlm
