# Writes a C++ file holding every embedded file as constant bytes, looked up by file name: the
# templates of TEMPLATE_DIR (*.mustache, *.tmpl) and the Python programs of PYTHON_DIR (*.py),
# which bridge-launch writes next to a job or runs in the user's Python. Names are unique
# across the two folders. Constant data, so that a command pays nothing at start-up for the
# files it does not use.
file(GLOB templates ${TEMPLATE_DIR}/*.mustache ${TEMPLATE_DIR}/*.tmpl)
file(GLOB programs ${PYTHON_DIR}/*.py)
set(files ${templates} ${programs})
list(SORT files)
set(arrays "")
set(rows "")
set(index 0)
foreach(path ${files})
  get_filename_component(f ${path} NAME)
  file(READ ${path} content HEX)
  if(content STREQUAL "")
    string(APPEND rows "    {\"${f}\", {}},\n")
  else()
    string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," bytes "${content}")
    string(APPEND arrays "constexpr char kFile${index}[] = {${bytes}};\n")
    string(APPEND rows "    {\"${f}\", {kFile${index}, sizeof kFile${index}}},\n")
  endif()
  math(EXPR index "${index} + 1")
endforeach()
file(WRITE ${OUT}.tmp "// Generated from templates/ and python/ at build time. Do not edit.\n"
  "#include \"system/templates.h\"\n\nnamespace bridge {\n\nnamespace {\n\n"
  "// clang-format off\n${arrays}\n"
  "struct EmbeddedFile {\n  std::string_view name;\n  std::string_view text;\n};\n\n"
  "constexpr EmbeddedFile kFiles[] = {\n${rows}};\n// clang-format on\n\n}  // namespace\n\n"
  "std::optional<std::string_view> embedded_template(std::string_view name) {\n"
  "  for (const EmbeddedFile& file : kFiles)\n"
  "    if (file.name == name) return file.text;\n"
  "  return std::nullopt;\n}\n\n}  // namespace bridge\n")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
