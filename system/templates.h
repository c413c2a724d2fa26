// Templates embedded at build time from templates/ (see cmake/embed_templates.cmake).
//
// template_text returns the embedded text by file name, or, when `override_path` is given,
// that file's contents (the --template / executor.slurm.template override). An unreadable
// override or unknown name is reported as an error and yields nullopt. template_view is the
// same text without a copy of the embedded one.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "base/diagnostics.h"

namespace bridge {

// The embedded file of that name (constant data), or nullopt.
std::optional<std::string_view> embedded_template(std::string_view name);

std::optional<std::string> template_text(const std::string& name, const std::string& override_path,
                                         Diagnostics& diags);

// The text template_text gives: a view of the embedded data, or of `file_text`, which holds
// the override file's contents and must outlive the view.
std::optional<std::string_view> template_view(const std::string& name,
                                              const std::string& override_path,
                                              std::string& file_text, Diagnostics& diags);

}  // namespace bridge
