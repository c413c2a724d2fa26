// bridge-launch entry point: all work happens in run_cli.
#include <exception>
#include <iostream>

#include "launcher/cli.h"

int main(int argc, char** argv) {
  try {
    std::vector<std::string> args(argv + 1, argv + argc);
    return bridge::run_cli(args, std::cout, std::cerr);
  } catch (const std::exception& e) {
    std::cerr << "bridge-launch: internal error: " << e.what() << "\n";
  } catch (...) {
    std::cerr << "bridge-launch: internal error\n";
  }
  return 1;
}
