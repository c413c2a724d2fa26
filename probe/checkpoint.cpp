#include "probe/checkpoint.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

namespace bridge::probe {

namespace {

namespace fs = std::filesystem;

constexpr const char* kTracker = "latest_checkpointed_iteration.txt";

ProbeResult<int> positive_override(const Options& options, const char* key, int unset) {
  const auto text = override_value(options.runtime_overrides, key);
  if (!text || *text == "null") return unset;
  const auto value = parse_int64(*text);
  if (!value || *value < 1 || *value > (int64_t{1} << 30))
    return ProbeStatus(kExitUsage,
                       str_printf("%s must be a whole number >= 1, got '%s'", key, text->c_str()));
  return static_cast<int>(*value);
}

std::string text_override(const Options& options, const char* key) {
  const auto text = override_value(options.runtime_overrides, key);
  return text && *text != "null" ? *text : "";
}

std::string shard_path(const std::string& root, int iteration, int rank) {
  return checkpoint_dir(root, iteration) + str_printf("/rank_%05d", rank);
}

// Writes `text` to `path` through a temporary file renamed over it: a reader sees the old or
// the new content, never half of it.
ProbeStatus write_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    out.flush();
    if (!out)
      return ProbeStatus(kExitInternal,
                         str_printf("cannot write %s: %s", tmp.c_str(), std::strerror(errno)));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return ProbeStatus(kExitInternal, str_printf("cannot rename %s to %s: %s", tmp.c_str(),
                                                 path.c_str(), std::strerror(errno)));
  return ProbeStatus();
}

// The complete checkpoints under `root` (iteration directories not newer than the tracker).
std::vector<int> saved_iterations(const std::string& root, int newest) {
  std::vector<int> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("iter_", 0) != 0) continue;
    const auto value = parse_int64(name.substr(5));
    if (value && *value > 0 && *value <= newest) out.push_back(static_cast<int>(*value));
  }
  std::sort(out.begin(), out.end());
  return out;
}

ProbeStatus prune(const CheckpointSettings& settings, int newest) {
  if (settings.keep < 1) return ProbeStatus();
  std::vector<int> saved = saved_iterations(settings.save, newest);
  const size_t keep = static_cast<size_t>(settings.keep);
  for (size_t i = 0; i + keep < saved.size(); ++i) {
    std::error_code ec;
    fs::remove_all(checkpoint_dir(settings.save, saved[i]), ec);
    if (ec)
      return ProbeStatus(kExitInternal, str_printf("cannot remove %s: %s",
                                                   checkpoint_dir(settings.save, saved[i]).c_str(),
                                                   ec.message().c_str()));
  }
  return ProbeStatus();
}

}  // namespace

ProbeResult<CheckpointSettings> checkpoint_settings(const Options& options) {
  CheckpointSettings s;
  s.save = text_override(options, "checkpoint.save");
  s.load = text_override(options, "checkpoint.load");
  ProbeResult<int> interval = positive_override(options, "checkpoint.save_interval", 0);
  if (!interval.ok()) return interval.status();
  s.interval = *interval;
  ProbeResult<int> keep = positive_override(options, "checkpoint.most_recent_k", -1);
  if (!keep.ok()) return keep.status();
  s.keep = *keep;
  return s;
}

std::string checkpoint_dir(const std::string& root, int iteration) {
  return root + str_printf("/iter_%07d", iteration);
}

ProbeResult<int> newest_checkpoint(const std::string& root, int world_size) {
  if (root.empty()) return 0;
  std::ifstream in(root + "/" + kTracker);
  if (!in) return 0;  // nothing saved yet: a start from scratch, as Megatron does
  std::string text(64, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  const auto iteration = parse_int64(text);
  if (!iteration || *iteration < 0 || *iteration > (int64_t{1} << 30))
    return ProbeStatus(
        kExitUsage, str_printf("%s/%s does not hold an iteration number", root.c_str(), kTracker));
  const int it = static_cast<int>(*iteration);
  for (int rank = 0; rank < world_size; ++rank) {
    struct stat st {};
    if (::stat(shard_path(root, it, rank).c_str(), &st) != 0)
      return ProbeStatus(kExitUsage, str_printf("the tracker names iteration %d, but %s has no "
                                                "shard of rank %d (saved by another world size?)",
                                                it, checkpoint_dir(root, it).c_str(), rank));
  }
  return it;
}

ProbeStatus save_checkpoint(const CheckpointSettings& settings, int iteration, Cluster& cluster) {
  const std::string dir = checkpoint_dir(settings.save, iteration);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    return ProbeStatus(kExitInternal,
                       str_printf("cannot create %s: %s", dir.c_str(), ec.message().c_str()));
  ProbeStatus written = write_atomically(shard_path(settings.save, iteration, cluster.rank),
                                         str_printf("iteration %d\n", iteration));
  if (!written.ok()) return written;
  ProbeStatus all = barrier(cluster, str_printf("checkpoint of iteration %d", iteration));
  if (!all.ok()) return all;
  if (cluster.rank != 0) return ProbeStatus();
  ProbeStatus tracked =
      write_atomically(settings.save + "/" + kTracker, str_printf("%d\n", iteration));
  if (!tracked.ok()) return tracked;
  std::printf("bridge-probe: saved checkpoint iteration %d to %s\n", iteration, dir.c_str());
  std::fflush(stdout);
  return prune(settings, iteration);
}

}  // namespace bridge::probe
