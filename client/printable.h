#ifndef DPCURATOR_CLIENT_PRINTABLE_H_
#define DPCURATOR_CLIENT_PRINTABLE_H_

// Caller text, made safe to print on a terminal (issue 36, item 9).
//
// Text the server holds was typed by someone else: an analyst's requested
// dataset id ends up as an audit row's target, a curator's dataset name or
// category in a listing. Printed raw, such text can move the cursor, clear
// the screen, set the window title, or hold a newline that starts a forged
// row of the table it sits in. Printable() escapes everything that is not
// plain printable text:
//   - C0 controls (newline, tab, ESC, ...) and DEL: \xNN;
//   - C1 controls (U+0080..U+009F) and the Unicode controls that reorder
//     or hide text (bidi embeddings, overrides and isolates, LRM/RLM/ALM,
//     zero-width joiners and spaces, the BOM, line/paragraph separators):
//     \u{NNNN};
//   - bytes that are not valid UTF-8: \xNN;
//   - the backslash itself: \\, so that no escape can be forged.
// Everything else, UTF-8 letters included, is kept. --json output needs
// none of this: JSON strings escape their control characters.

#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/strings/string_view.h"

namespace dpcurator::client {

namespace printable_internal {

// The code point of a valid, shortest-form UTF-8 sequence at text[i], and
// its length; length 0 when the bytes there are not one.
inline int DecodeUtf8(absl::string_view text, size_t i, uint32_t* code_point) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  int length = 0;
  uint32_t value = 0;
  uint32_t minimum = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
    value = lead & 0x1F;
    minimum = 0x80;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    value = lead & 0x0F;
    minimum = 0x800;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    value = lead & 0x07;
    minimum = 0x10000;
  } else {
    return 0;
  }
  if (i + static_cast<size_t>(length) > text.size()) return 0;
  for (int k = 1; k < length; ++k) {
    const unsigned char next = byte(i + static_cast<size_t>(k));
    if ((next & 0xC0) != 0x80) return 0;
    value = (value << 6) | (next & 0x3F);
  }
  if (value < minimum || value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF)) return 0;
  *code_point = value;
  return length;
}

// Format characters and controls that can hide or reorder what is shown.
inline bool IsInvisibleControl(uint32_t c) {
  return (c >= 0x80 && c <= 0x9F) || c == 0x61C || (c >= 0x200B && c <= 0x200F) ||
         (c >= 0x2028 && c <= 0x202E) || (c >= 0x2060 && c <= 0x206F) || c == 0xFEFF ||
         (c >= 0xFFF9 && c <= 0xFFFB);
}

}  // namespace printable_internal

inline std::string Printable(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  char escape[16];
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\\') {
      out += "\\\\";
      ++i;
    } else if (c < 0x20 || c == 0x7F) {
      std::snprintf(escape, sizeof(escape), "\\x%02x", c);
      out += escape;
      ++i;
    } else if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
    } else {
      uint32_t code_point = 0;
      const int length = printable_internal::DecodeUtf8(text, i, &code_point);
      if (length == 0) {
        std::snprintf(escape, sizeof(escape), "\\x%02x", c);
        out += escape;
        ++i;
      } else if (printable_internal::IsInvisibleControl(code_point)) {
        std::snprintf(escape, sizeof(escape), "\\u{%04x}", static_cast<unsigned>(code_point));
        out += escape;
        i += static_cast<size_t>(length);
      } else {
        out.append(text.data() + i, static_cast<size_t>(length));
        i += static_cast<size_t>(length);
      }
    }
  }
  return out;
}

}  // namespace dpcurator::client

#endif  // DPCURATOR_CLIENT_PRINTABLE_H_
