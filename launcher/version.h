// The program's version line for --version: the release and the git commit it was built from.
//
// Only version.cpp sees the commit (a compile definition): when the commit changes, that one
// file is rebuilt, not every source of launcher/, and a clone at another commit still hits ccache
// on the rest.
#pragma once

#include <string>

namespace bridge {

// "bridge-launch 0.1.0 (commit 0123456789ab)", or "(commit unknown)" outside a checkout.
std::string version_line();

}  // namespace bridge
