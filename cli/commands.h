// The `ringlm` subcommands. Each takes the arguments after its name, writes
// its results to `out` and its errors, warnings and progress to `err`, and
// returns the process exit status. main.cc passes std::cout and std::cerr;
// tests pass string streams.
#ifndef RINGLM_CLI_COMMANDS_H_
#define RINGLM_CLI_COMMANDS_H_

#include <ostream>
#include <string>
#include <vector>

namespace ringlm {

int RunGenerate(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int RunTokenize(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int RunInspect(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int RunStatus(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int RunSynth(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int RunBench(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int RunKeygen(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int RunJoinCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace ringlm

#endif  // RINGLM_CLI_COMMANDS_H_
