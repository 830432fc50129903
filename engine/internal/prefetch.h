#pragma once

// PrefetchForWrite: asks for a cache line in the state a store needs.
//
// Why: the engine's hot lines (a var, a recycled op block) were usually last
// written by another core. A plain prefetch fetches a shared copy, and the
// store that follows still waits for the other core to give the line up; a
// write prefetch (x86 PREFETCHW) fetches it owned, so the transfer overlaps
// other work. GCC emits PREFETCHW only for targets that declare it, hence
// the target attribute; x86-64 processors without it (none since 2014 on
// Intel, none ever on AMD) execute the instruction as a no-op.
//
// Thread safety: a hint; it changes no state a program can observe.

namespace ember::engine::internal {

#if defined(__x86_64__) && defined(__GNUC__)
inline void PrefetchForWrite(const void* address) {
  asm volatile("prefetchw %0" : : "m"(*static_cast<const char*>(address)));
}
#else
inline void PrefetchForWrite(const void* address) { __builtin_prefetch(address, 1); }
#endif

}  // namespace ember::engine::internal
