# Writes a C++ file holding every embedded file as a raw string, keyed by file name: the
# templates of TEMPLATE_DIR (*.mustache, *.tmpl) and the Python programs of PYTHON_DIR (*.py),
# which bridge-launch writes next to a job or runs in the user's Python. Names are unique
# across the two folders.
file(GLOB templates ${TEMPLATE_DIR}/*.mustache ${TEMPLATE_DIR}/*.tmpl)
file(GLOB programs ${PYTHON_DIR}/*.py)
set(files ${templates} ${programs})
list(SORT files)
set(body "")
foreach(path ${files})
  get_filename_component(f ${path} NAME)
  file(READ ${path} content HEX)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," bytes "${content}")
  string(APPEND body "  {\"${f}\", std::string({${bytes}})},\n")
endforeach()
file(WRITE ${OUT}.tmp "// Generated from templates/ and python/ at build time. Do not edit.\n"
  "#include <map>\n#include <string>\n\nnamespace bridge {\n\n"
  "const std::map<std::string, std::string>& embedded_templates() {\n"
  "  static const std::map<std::string, std::string> kTemplates{\n${body}  };\n"
  "  return kTemplates;\n}\n\n}  // namespace bridge\n")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
