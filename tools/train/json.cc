#include "tools/train/json.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include <fmt/format.h>

#include "engine/error.h"

namespace ember::train {
namespace {

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Json Document() {
    Json value = Value();
    Space();
    if (pos_ != text_.size()) Fail("trailing characters");
    return value;
  }

 private:
  [[noreturn]] void Fail(std::string_view what) const {
    throw InvalidArgument(fmt::format("[Json::Parse] {} at byte {}", what, pos_));
  }
  void Space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\t' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool Eat(char c) {
    Space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void Expect(char c) {
    if (!Eat(c)) Fail(fmt::format("expected '{}'", c));
  }
  bool Word(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  Json Value() {
    Space();
    if (pos_ >= text_.size()) Fail("unexpected end");
    const char c = text_[pos_];
    if (c == '{') return ObjectValue();
    if (c == '[') return ArrayValue();
    if (c == '"') return Json(String());
    if (Word("true")) return Json(true);
    if (Word("false")) return Json(false);
    if (Word("null")) return Json();
    return Json(Number());
  }

  Json ObjectValue() {
    Expect('{');
    Json object = Json::MakeObject();
    if (Eat('}')) return object;
    do {
      Space();
      std::string key = String();
      Expect(':');
      object.Set(key, Value());
    } while (Eat(','));
    Expect('}');
    return object;
  }

  Json ArrayValue() {
    Expect('[');
    Json array = Json::MakeArray();
    if (Eat(']')) return array;
    do {
      array.Push(Value());
    } while (Eat(','));
    Expect(']');
    return array;
  }

  double Number() {
    double value = 0;
    const char* begin = text_.data() + pos_;
    const auto [end, ec] = std::from_chars(begin, text_.data() + text_.size(), value);
    if (ec != std::errc() || end == begin) Fail("bad value");
    pos_ += static_cast<std::size_t>(end - begin);
    return value;
  }

  std::string String() {
    if (pos_ >= text_.size() || text_[pos_] != '"') Fail("expected a string");
    ++pos_;
    std::string out;
    while (true) {
      if (pos_ >= text_.size()) Fail("unterminated string");
      const char c = text_[pos_++];
      if (c == '"') return out;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size()) Fail("unterminated string");
      const char e = text_[pos_++];
      switch (e) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'u': {
          unsigned code = 0;
          const auto [end, ec] = std::from_chars(
              text_.data() + pos_, text_.data() + std::min(pos_ + 4, text_.size()), code, 16);
          if (ec != std::errc() || end != text_.data() + pos_ + 4) Fail("bad \\u escape");
          pos_ += 4;
          if (code < 0x80) {
            out += static_cast<char>(code);
          } else if (code < 0x800) {
            out += static_cast<char>(0xc0 | (code >> 6));
            out += static_cast<char>(0x80 | (code & 0x3f));
          } else {  // surrogate pairs are kept as two code points: traces never hold them
            out += static_cast<char>(0xe0 | (code >> 12));
            out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
            out += static_cast<char>(0x80 | (code & 0x3f));
          }
          break;
        }
        default:
          out += e;  // \" \\ \/
      }
    }
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

void Escape(std::string& out, const std::string& text) {
  out += '"';
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", c);
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

const Json& Null() {
  static const Json* null = new Json();  // leaked: returned by reference at any time
  return *null;
}

}  // namespace

Json Json::Parse(std::string_view text) { return Parser(text).Document(); }

double Json::number() const { return is_number() ? std::get<double>(value_) : 0.0; }

const std::string& Json::string() const {
  static const std::string* empty = new std::string();
  return is_string() ? std::get<std::string>(value_) : *empty;
}

const Json::Array& Json::array() const {
  static const Array* empty = new Array();
  return is_array() ? std::get<Array>(value_) : *empty;
}

const Json& Json::operator[](std::string_view key) const {
  if (!is_object()) return Null();
  for (const auto& [k, v] : std::get<Object>(value_)) {
    if (k == key) return v;
  }
  return Null();
}

Json& Json::Push(Json value) {
  if (!is_array()) value_ = Array{};
  std::get<Array>(value_).push_back(std::move(value));
  return *this;
}

Json& Json::Set(std::string_view key, Json value) {
  if (!is_object()) value_ = Object{};
  for (auto& [k, v] : std::get<Object>(value_)) {
    if (k == key) {
      v = std::move(value);
      return *this;
    }
  }
  std::get<Object>(value_).emplace_back(std::string(key), std::move(value));
  return *this;
}

std::string Json::Dump(int indent) const {
  std::string out;
  DumpTo(out, indent, 0);
  return out;
}

void Json::DumpTo(std::string& out, int indent, int depth) const {
  auto newline = [&](int level) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<std::size_t>(indent * level), ' ');
  };
  switch (value_.index()) {
    case 0:
      out += "null";
      return;
    case 1:
      out += std::get<bool>(value_) ? "true" : "false";
      return;
    case 2: {
      const double d = std::get<double>(value_);
      if (!std::isfinite(d)) {
        out += "null";
      } else if (d == std::floor(d) && std::abs(d) < 1e15) {
        out += fmt::format("{}", static_cast<int64_t>(d));
      } else {
        out += fmt::format("{}", d);
      }
      return;
    }
    case 3:
      Escape(out, std::get<std::string>(value_));
      return;
    case 4: {
      const Array& a = std::get<Array>(value_);
      out += '[';
      for (std::size_t i = 0; i < a.size(); ++i) {
        if (i > 0) out += ',';
        newline(depth + 1);
        a[i].DumpTo(out, indent, depth + 1);
      }
      if (!a.empty()) newline(depth);
      out += ']';
      return;
    }
    default: {
      const Object& o = std::get<Object>(value_);
      out += '{';
      for (std::size_t i = 0; i < o.size(); ++i) {
        if (i > 0) out += ',';
        newline(depth + 1);
        Escape(out, o[i].first);
        out += indent < 0 ? ":" : ": ";
        o[i].second.DumpTo(out, indent, depth + 1);
      }
      if (!o.empty()) newline(depth);
      out += '}';
      return;
    }
  }
}

}  // namespace ember::train
