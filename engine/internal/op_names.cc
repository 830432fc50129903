#include "engine/internal/op_names.h"

#include <array>
#include <string>

#include <absl/container/node_hash_set.h>

#include "engine/base/mutex.h"

namespace ember::engine::internal {
namespace {

struct NameTable {
  Mutex mu;
  // Node-based: an element never moves, so views of it stay valid.
  absl::node_hash_set<std::string> names ABSL_GUARDED_BY(mu);
};

NameTable& Table() {
  // Leaked on purpose: blocks holding views may outlive static destruction.
  static NameTable* const table = new NameTable;
  return *table;
}

// The names this thread pushed last, by the address and length its caller
// passed them with.
struct RecentNames {
  struct Entry {
    const char* data = nullptr;
    std::size_t size = 0;
    std::string_view interned;
  };
  static constexpr std::size_t kSize = 16;
  std::array<Entry, kSize> entries;
  std::size_t next = 0;
};

}  // namespace

std::string_view InternOpName(std::string_view name, bool* interned) {
  *interned = true;
  if (name.empty()) return {};
  thread_local RecentNames recent;
  for (const RecentNames::Entry& entry : recent.entries) {
    if (entry.data == name.data() && entry.size == name.size() && entry.interned == name) {
      return entry.interned;
    }
  }
  std::string_view stable;
  {
    NameTable& table = Table();
    MutexLock lock(&table.mu);
    // Debian's Abseil has its own string_view type, not std::string_view.
    auto found = table.names.find(absl::string_view(name.data(), name.size()));
    if (found == table.names.end()) {
      if (table.names.size() >= kMaxNames) {
        *interned = false;
        return {};
      }
      found = table.names.emplace(std::string(name)).first;
    }
    stable = *found;
  }
  recent.entries[recent.next++ % RecentNames::kSize] = {name.data(), name.size(), stable};
  return stable;
}

}  // namespace ember::engine::internal
