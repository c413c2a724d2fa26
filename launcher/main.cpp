// bridge-launch entry point: builds the real services (the composition root, launcher/services.h)
// and hands them to run_cli, where all the work happens.
#include <csignal>
#include <exception>
#include <iostream>

#include "launcher/cli.h"
#include "launcher/services.h"

int main(int argc, char** argv) {
  // `bridge-launch recipe.yaml | head` must not kill the launcher (and with it the job's
  // bookkeeping) when the reader goes away: a write to the closed pipe then fails (EPIPE)
  // instead of raising SIGPIPE. Rank processes get the default disposition back before exec.
  std::signal(SIGPIPE, SIG_IGN);
  try {
    std::vector<std::string> args(argv + 1, argv + argc);
    bridge::RealServices real;
    return bridge::run_cli(args, std::cout, std::cerr, real.services());
  } catch (const std::exception& e) {
    std::cerr << "bridge-launch: internal error: " << e.what() << "\n";
  } catch (...) {
    std::cerr << "bridge-launch: internal error\n";
  }
  return 1;
}
