# cmake -DINPUT=<file> -DOUTPUT=<file.cc> -P embed_file.cmake
# Writes a .cc defining ringlm::EmbeddedWebPage() over INPUT's bytes (a byte
# array, so any content is safe, unlike a raw string literal).
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" hex_length)
math(EXPR size "${hex_length} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" bytes "${bytes}")
file(WRITE "${OUTPUT}.tmp"
  "// Generated from ${INPUT} by api/embed_file.cmake. Do not edit.\n"
  "#include \"api/web_page.h\"\n\n"
  "namespace ringlm {\nnamespace {\nconst unsigned char kPage[] = {\n${bytes}0};\n}  // namespace\n\n"
  "std::string_view EmbeddedWebPage() { return std::string_view(reinterpret_cast<const char*>(kPage), ${size}); }\n\n"
  "}  // namespace ringlm\n")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
