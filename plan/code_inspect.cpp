// inspect_code (plan/code_plan.h): which files of a source tree a job gets, their size, the
// tree's git state and the snapshot's hash. Reads only; git runs through the CommandRunner.
#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "base/utf8.h"
#include "plan/code_plan.h"
#include "plan/code_tree.h"

namespace bridge {

namespace fs = std::filesystem;

namespace {

// git in the tree, with no optional lock taken (a `git status` may otherwise rewrite the
// index of a tree the user is working in) and no pager or prompt.
CommandResult run_git(CommandRunner& runner, const std::string& tree,
                      std::vector<std::string> args) {
  CommandSpec spec;
  spec.argv = {"git", "-C", tree};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.extra_env = {{"GIT_OPTIONAL_LOCKS", "0"}, {"GIT_TERMINAL_PROMPT", "0"}};
  spec.timeout = std::chrono::milliseconds(60000);
  return runner.run(spec);
}

std::vector<std::string> split_nul(const std::string& text) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\0', at);
    if (end == std::string::npos) end = text.size();
    if (end > at) out.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

class Inspector {
 public:
  Inspector(CodePlan& code, CommandRunner& runner, Diagnostics& diags)
      : code_(code), runner_(runner), diags_(diags) {}

  bool run(CodeDepth depth) {
    if (!check_root()) return false;
    CodeInspection found;
    std::vector<std::string> candidates;
    if (!list_git(found, candidates)) return false;
    if (!found.git && !list_by_patterns(candidates)) return false;
    if (code_.mode == CodeMode::kSnapshot) {
      StatusOr<CodeTree> tree = CodeTree::open(code_.source);
      if (!tree.ok())
        return fail("code-path-unreadable", tree.why(), "make the tree readable by this user");
      if (!measure(*tree, candidates, found)) return false;
      if (!check_secrets(found) || !check_size(found)) return false;
      if (depth == CodeDepth::kHash && !hash(*tree, found)) return false;
    }
    code_.inspection = std::move(found);
    return true;
  }

 private:
  bool fail(const char* code, std::string message, std::string help) {
    diags_.error(code, "runtime.code.path", code_.loc, std::move(message), std::move(help));
    return false;
  }

  bool check_root() {
    std::error_code ec;
    fs::file_status st = fs::status(code_.source, ec);
    if (ec || !fs::exists(st))
      return fail(
          "code-path-missing",
          fmt::format("`runtime.code.path` {} does not exist", printable_text(code_.source, 200)),
          "check the path; `~` and ${VAR} are expanded on the submitting host");
    if (!fs::is_directory(st))
      return fail("code-path-not-directory",
                  fmt::format("`runtime.code.path` {} is not a directory",
                              printable_text(code_.source, 200)),
                  "name the directory of the source tree (a git work tree or a folder)");
    fs::directory_iterator probe(code_.source, ec);
    if (ec)
      return fail("code-path-unreadable",
                  fmt::format("`runtime.code.path` {} cannot be read: {}",
                              printable_text(code_.source, 200), ec.message()),
                  "make the tree readable by this user, or point at a copy of it");
    return true;
  }

  // A git work tree: the files git tracks (below the path), HEAD and whether they differ.
  bool list_git(CodeInspection& found, std::vector<std::string>& files) {
    CommandResult inside = run_git(runner_, code_.source, {"rev-parse", "--is-inside-work-tree"});
    if (!inside.ok() || inside.out.rfind("true", 0) != 0) {
      std::error_code ec;
      if (!inside.started && fs::exists(fs::path(code_.source) / ".git", ec))
        return fail("code-git-unavailable",
                    fmt::format("{} is a git work tree, but git could not be run: {}",
                                printable_text(code_.source, 200), printable_text(inside.err, 200)),
                    "install git on the submitting host, or list the files with "
                    "runtime.code.include");
      return true;  // not git: the include patterns decide
    }
    found.git = true;
    CommandResult head = run_git(runner_, code_.source, {"rev-parse", "--verify", "-q", "HEAD"});
    if (head.ok()) found.commit = head.out.substr(0, head.out.find_first_of("\r\n"));
    CommandResult status = run_git(
        runner_, code_.source, {"status", "--porcelain", "--untracked-files=no", "-z", "--", "."});
    found.dirty = status.ok() ? !status.out.empty() : true;
    if (code_.mode == CodeMode::kMount) return true;
    CommandResult listed = run_git(runner_, code_.source, {"ls-files", "-z", "--cached"});
    if (!listed.ok())
      return fail(
          "code-git-failed",
          fmt::format("git could not list the files of {}: {}", printable_text(code_.source, 200),
                      printable_text(listed.err + listed.out, 200)),
          "run `git status` in the tree to see what is wrong");
    for (auto& f : split_nul(listed.out))
      if (code_.include.empty() || matches_include(f)) files.push_back(std::move(f));
    return true;
  }

  bool matches_include(const std::string& path) const {
    return std::any_of(code_.include.begin(), code_.include.end(),
                       [&](const std::string& p) { return code_path_matches(p, path); });
  }

  // Not git: every file below the path that an include pattern matches (.git never).
  bool list_by_patterns(std::vector<std::string>& files) {
    if (code_.mode == CodeMode::kMount) return true;
    if (code_.include.empty())
      return fail("code-not-git",
                  fmt::format("{} is not a git work tree, so which files to ship is not "
                              "known",
                              printable_text(code_.source, 200)),
                  "list them with runtime.code.include, e.g. include: [\"**/*.py\"], or "
                  "use mode: mount");
    // Listed by the same walker that reads the files: a directory link is an entry, never
    // entered.
    StatusOr<CodeTree> tree = CodeTree::open(code_.source);
    StatusOr<std::vector<std::string>> listed =
        tree.ok() ? tree->list_files() : StatusOr<std::vector<std::string>>(tree.status());
    if (!listed.ok())
      return fail("code-path-unreadable",
                  fmt::format("cannot list the files of {}: {}", printable_text(code_.source, 200),
                              listed.why()),
                  "make the tree readable by this user");
    for (auto& rel : *listed)
      if (matches_include(rel)) files.push_back(std::move(rel));
    return true;
  }

  // Sizes and kinds, each path found through the tree without following a link
  // (plan/code_tree.h). A tracked file deleted from the disk is not shipped (an uncommitted
  // deletion), and neither is a directory git lists (a submodule) or a FIFO or device: only
  // regular files are read. A link is shipped as a link and holds no bytes, so the size
  // --dry-run shows is the size the copy counts (`status`).
  bool measure(const CodeTree& tree, const std::vector<std::string>& candidates,
               CodeInspection& found) {
    for (const auto& rel : candidates) {
      StatusOr<CodeEntry> entry = tree.look(rel);
      if (!entry.ok())
        return fail("code-path-unreadable", entry.why(), "make the tree readable by this user");
      if (entry->kind == CodeEntryKind::kThroughLink) return through_link(rel, entry->link);
      if (entry->kind != CodeEntryKind::kFile && entry->kind != CodeEntryKind::kLink) continue;
      bool link = entry->kind == CodeEntryKind::kLink;
      found.files.push_back(
          CodeFile{rel, link ? 0 : entry->size, !link && entry->executable, link});
      found.bytes += found.files.back().size;
    }
    std::sort(found.files.begin(), found.files.end(),
              [](const CodeFile& a, const CodeFile& b) { return a.path < b.path; });
    return true;
  }

  // A listed file behind a directory that is now a link (a tracked `conf/` replaced by
  // `conf -> ../outside`): following it would ship files from outside the tree, and
  // skipping it would drop files the job expects, so the user decides.
  bool through_link(const std::string& rel, const std::string& link) {
    return fail("code-path-through-link",
                fmt::format("{} in {} lies behind {}, a symbolic link; a snapshot never follows "
                            "a link, so it cannot ship what the link points at",
                            printable_text(rel, 200), printable_text(code_.source, 200),
                            printable_text(link, 200)),
                "copy the files into the tree, commit the link itself (git add " +
                    printable_text(link, 200) + ") to ship it as a link, or use mode: mount");
  }

  // Secret-looking files (plan/code_tree.h, looks_like_secret): a glob over a tree outside git
  // picks up whatever lies there, so such a file is refused unless an include entry names it
  // without a wildcard. A tracked one is already in the repository's history: a warning.
  bool check_secrets(const CodeInspection& found) {
    bool ok = true;
    for (const auto& f : found.files) {
      if (f.symlink || !looks_like_secret(f.path) || named_on_purpose(f.path)) continue;
      std::string file = printable_text(f.path, 200);
      if (found.git) {
        diags_.warning("code-secret-file", "runtime.code.include", code_.loc,
                       fmt::format("{} looks like a secret and is shipped: git tracks it", file),
                       fmt::format("if it holds one, take it out of git; to ship it without this "
                                   "warning, name it in runtime.code.include: [\"{}\", ...]",
                                   file));
        continue;
      }
      ok = fail("code-secret-file",
                fmt::format("{} looks like a secret (keys, tokens, passwords) and an include "
                            "glob picked it up; it would be copied to the shared file system",
                            file),
                fmt::format("narrow runtime.code.include, or ship it on purpose by naming it "
                            "without a wildcard: include: [..., \"{}\"]",
                            file)) &&
           ok;
    }
    return ok;
  }

  bool named_on_purpose(const std::string& rel) const {
    return std::any_of(code_.include.begin(), code_.include.end(), [&](const std::string& p) {
      return p.find_first_of("*?") == std::string::npos && code_path_matches(p, rel);
    });
  }

  bool check_size(const CodeInspection& found) {
    if (found.bytes <= code_.max_bytes) return true;
    too_large(found.bytes, found.files.size());
    return false;
  }

  void too_large(std::uint64_t bytes, std::size_t files) {
    diags_.error("code-too-large", "runtime.code.max_size_mb",
                 code_.max_loc.has_position() ? code_.max_loc : code_.loc,
                 fmt::format("the snapshot of {} would be {} in {} files, over the limit of {} "
                             "(runtime.code.max_size_mb)",
                             printable_text(code_.source, 200), byte_size_text(bytes), files,
                             byte_size_text(code_.max_bytes)),
                 "narrow it with runtime.code.include (data and checkpoints belong on a "
                 "volume), raise runtime.code.max_size_mb, or use mode: mount");
  }

  // Reads every file through the tree in fixed memory (plan/code_tree.h); the limit is
  // checked against the bytes read, not only the sizes listed.
  bool hash(const CodeTree& tree, CodeInspection& found) {
    Sha256 sha;
    CodeByteBudget budget{code_.max_bytes};
    for (const auto& f : found.files) {
      if (f.symlink) {
        StatusOr<CodeEntry> entry = tree.look(f.path);
        if (!entry.ok()) return unreadable(entry.why());
        if (entry->kind != CodeEntryKind::kLink)
          return unreadable(printable_text(f.path, 200) + " is no longer a symbolic link");
        hash_code_file(sha, f, entry->link_target);
        continue;
      }
      Status streamed = tree.stream(f, sha, {}, nullptr, budget);
      if (!streamed.ok() && budget.wanted > 0) {
        too_large(budget.wanted, found.files.size());
        return false;
      }
      if (!streamed.ok()) return unreadable(streamed.why());
    }
    found.hash = sha.hex();
    return true;
  }

  bool unreadable(const std::string& why) {
    return fail("code-path-unreadable",
                fmt::format("cannot read the tree {}: {}", printable_text(code_.source, 200), why),
                "make the tree readable by this user, and keep it unchanged while it is read");
  }

  CodePlan& code_;
  CommandRunner& runner_;
  Diagnostics& diags_;
};

}  // namespace

bool inspect_code(CodePlan& code, CommandRunner& runner, CodeDepth depth, Diagnostics& diags) {
  return Inspector(code, runner, diags).run(depth);
}

}  // namespace bridge
