# Writes a C++ file holding every file of TEMPLATE_DIR as a raw string, keyed by file name.
file(GLOB files RELATIVE ${TEMPLATE_DIR} ${TEMPLATE_DIR}/*.mustache ${TEMPLATE_DIR}/*.tmpl ${TEMPLATE_DIR}/*.py)
list(SORT files)
set(body "")
foreach(f ${files})
  file(READ ${TEMPLATE_DIR}/${f} content HEX)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," bytes "${content}")
  string(APPEND body "  {\"${f}\", std::string({${bytes}})},\n")
endforeach()
file(WRITE ${OUT}.tmp "// Generated from templates/ at build time. Do not edit.\n"
  "#include <map>\n#include <string>\n\nnamespace bridge {\n\n"
  "const std::map<std::string, std::string>& embedded_templates() {\n"
  "  static const std::map<std::string, std::string> kTemplates{\n${body}  };\n"
  "  return kTemplates;\n}\n\n}  // namespace bridge\n")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
