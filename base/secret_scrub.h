// The one scrubber of secret values in messages.
//
// Text from a recipe or from a scheduler client (kubectl, sbatch, squeue, scontrol) may
// hold the value of a secret environment variable: quoted by a diagnostic, echoed by a
// client that prints its environment or the object it was given. Every path that prints
// such text passes it through scrub_secrets with the secret values known for the run
// (Diagnostics carries them for messages, see base/diagnostics.h), so no message ever
// shows one. Pure functions.
#pragma once

#include <string>
#include <vector>

namespace bridge {

// Every secret value in `text` replaced by <secret>, also in the spellings messages and
// clients print it in: as is, JSON-escaped (with and without Go's HTML escapes, as kubectl
// echoes objects), base64 (a Kubernetes Secret's data) and escaped for a terminal
// (printable_text: control characters and bytes that are not UTF-8 as \xNN). Empty values
// are skipped; a value under 8 bytes is replaced only where it is not part of a longer word
// (a secret `v` leaves `value` alone).
std::string scrub_secrets(std::string text, const std::vector<std::string>& secrets);

}  // namespace bridge
