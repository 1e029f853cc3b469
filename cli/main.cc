// `ringlm`: the command-line client. Dispatches to a subcommand.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.h"

namespace {

constexpr char kUsage[] = R"(usage: ringlm COMMAND [options]

Run and inspect large language models, on one machine or across a ringlm cluster.

commands:
  generate   generate text from a prompt
  tokenize   show the token ids of a text
  inspect    show a GGUF file's metadata, tensors and sizes
  status     show a running cluster: nodes, memory, layers, health, caches
  synth      write a GGUF model of a known shape with random weights
  bench      measure prompt processing and decode speed (llama-bench style)
  keygen     write a new cluster key (every node of a cluster shares one)
  join-command  print the line that adds another machine to this cluster

Run 'ringlm COMMAND --help' for a command's options.
)";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  const std::string command = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "generate") return ringlm::RunGenerate(args, std::cout, std::cerr);
  if (command == "tokenize") return ringlm::RunTokenize(args, std::cout, std::cerr);
  if (command == "inspect") return ringlm::RunInspect(args, std::cout, std::cerr);
  if (command == "status") return ringlm::RunStatus(args, std::cout, std::cerr);
  if (command == "synth") return ringlm::RunSynth(args, std::cout, std::cerr);
  if (command == "bench") return ringlm::RunBench(args, std::cout, std::cerr);
  if (command == "keygen") return ringlm::RunKeygen(args, std::cout, std::cerr);
  if (command == "join-command") return ringlm::RunJoinCommand(args, std::cout, std::cerr);
  if (command == "--help" || command == "-h" || command == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  std::fprintf(stderr, "ringlm: unknown command '%s'\n\n%s", command.c_str(), kUsage);
  return 2;
}
