// The `ringlm` subcommands. Each takes the arguments after its name and
// returns the process exit status; errors go to stderr.
#ifndef RINGLM_CLI_COMMANDS_H_
#define RINGLM_CLI_COMMANDS_H_

#include <string>
#include <vector>

namespace ringlm {

int RunGenerate(const std::vector<std::string>& args);
int RunTokenize(const std::vector<std::string>& args);
int RunInspect(const std::vector<std::string>& args);
int RunStatus(const std::vector<std::string>& args);
int RunSynth(const std::vector<std::string>& args);
int RunBench(const std::vector<std::string>& args);
int RunKeygen(const std::vector<std::string>& args);
int RunJoinCommand(const std::vector<std::string>& args);

}  // namespace ringlm

#endif  // RINGLM_CLI_COMMANDS_H_
