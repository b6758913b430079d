#include "util/base64.hpp"

#include <array>
#include <cstdint>

#include <fmt/format.h>

namespace tfk8s::internal {
namespace {

constexpr std::string_view kAlphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

constexpr int kInvalid = -1;

constexpr std::array<int, 256> MakeDecodeTable() {
  std::array<int, 256> table{};
  for (int& v : table) {
    v = kInvalid;
  }
  for (std::size_t i = 0; i < kAlphabet.size(); ++i) {
    table[static_cast<unsigned char>(kAlphabet[i])] = static_cast<int>(i);
  }
  return table;
}

constexpr std::array<int, 256> kDecodeTable = MakeDecodeTable();

std::optional<std::string> Fail(std::string* error, std::string why) {
  if (error != nullptr) {
    *error = std::move(why);
  }
  return std::nullopt;
}

}  // namespace

std::string Base64Encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const std::uint32_t n = (std::uint32_t{static_cast<unsigned char>(bytes[i])} << 16) |
                            (std::uint32_t{static_cast<unsigned char>(bytes[i + 1])} << 8) |
                            std::uint32_t{static_cast<unsigned char>(bytes[i + 2])};
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += kAlphabet[(n >> 6) & 63];
    out += kAlphabet[n & 63];
  }
  const std::size_t rest = bytes.size() - i;
  if (rest > 0) {
    std::uint32_t n = std::uint32_t{static_cast<unsigned char>(bytes[i])} << 16;
    if (rest == 2) {
      n |= std::uint32_t{static_cast<unsigned char>(bytes[i + 1])} << 8;
    }
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += rest == 2 ? kAlphabet[(n >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::optional<std::string> Base64Decode(std::string_view text, std::string* error) {
  std::string out;
  out.reserve(text.size() / 4 * 3);
  std::array<int, 4> group{};
  int in_group = 0;       // symbols collected in the current group of four
  int padding = 0;        // '=' seen in the current (necessarily last) group
  bool finished = false;  // a padded group ended the data
  std::size_t symbols = 0;
  for (std::size_t pos = 0; pos < text.size(); ++pos) {
    const char c = text[pos];
    if (c == '\r' || c == '\n') {
      continue;
    }
    if (finished) {
      return Fail(error, fmt::format("data continues after padding (offset {})", pos));
    }
    ++symbols;
    if (c == '=') {
      // Padding may only fill the last one or two places of a group.
      if (in_group < 2) {
        return Fail(error, fmt::format("misplaced padding at offset {}", pos));
      }
      ++padding;
      group[in_group++] = 0;
    } else {
      const int v = kDecodeTable[static_cast<unsigned char>(c)];
      if (v == kInvalid) {
        return Fail(error, fmt::format("invalid character at offset {}", pos));
      }
      if (padding > 0) {
        return Fail(error, fmt::format("misplaced padding before offset {}", pos));
      }
      group[in_group++] = v;
    }
    if (in_group == 4) {
      const std::uint32_t n = (static_cast<std::uint32_t>(group[0]) << 18) |
                              (static_cast<std::uint32_t>(group[1]) << 12) |
                              (static_cast<std::uint32_t>(group[2]) << 6) |
                              static_cast<std::uint32_t>(group[3]);
      out += static_cast<char>((n >> 16) & 0xff);
      if (padding < 2) {
        out += static_cast<char>((n >> 8) & 0xff);
      }
      if (padding < 1) {
        out += static_cast<char>(n & 0xff);
      }
      finished = padding > 0;
      in_group = 0;
    }
  }
  if (in_group != 0) {
    return Fail(error, fmt::format("truncated input: {} symbols is not a multiple of 4", symbols));
  }
  return out;
}

}  // namespace tfk8s::internal
